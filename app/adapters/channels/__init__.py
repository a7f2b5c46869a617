"""Channel providers behind ``app.domain.ports.ChannelProvider``."""
