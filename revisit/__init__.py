"""The revisit component (issue 31): claims due revisits from PostgreSQL and feeds them to `<prefix>.incoming`."""
