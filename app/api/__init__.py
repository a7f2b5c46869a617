"""HTTP edge: routes, dependencies and the one place errors become HTTP answers."""
