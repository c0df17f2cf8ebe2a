"""The database's own jobs beyond loading: evidence grades, the observations overlay."""
