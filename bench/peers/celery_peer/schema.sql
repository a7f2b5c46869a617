-- The peer's ledger, next to the service's customers and reminders tables (the same seeded
-- rows). One row per (reminder, channel): 'sending' once claimed, 'sent' once written.
CREATE TABLE peer_ledger (
    id bigserial PRIMARY KEY,
    reminder_id varchar(200) NOT NULL REFERENCES reminders (id),
    channel varchar(32) NOT NULL,
    state varchar(16) NOT NULL,
    claimed_at timestamptz NOT NULL,
    sent_at timestamptz,
    outbox_file text,
    UNIQUE (reminder_id, channel)
);
