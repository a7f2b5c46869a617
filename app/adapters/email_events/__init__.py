"""Email providers' event webhooks (delivered, bounced, complained, deferred), one module
per provider behind ``app.domain.ports.EmailEventSource``; ``registry`` builds the
configured ones."""
