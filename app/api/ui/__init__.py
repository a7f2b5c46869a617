"""The server-rendered admin page (Jinja2 templates, no build step)."""
