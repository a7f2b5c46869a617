"""Push formats behind ``app.domain.ports.PushFormat``: one module per queue vendor."""
