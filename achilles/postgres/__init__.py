"""Django's PostgreSQL backend with the connect breaker (``achilles.dbguard``): ``ENGINE = "achilles.postgres"``."""
