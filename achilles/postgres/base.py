"""Django's PostgreSQL backend, its connections taken through the connect breaker.

Only the connect differs (``get_new_connection``): the pooled path waits for a connection with
``achilles.dbguard.checkout`` instead of one ``getconn()`` of the pool's whole timeout, the pool's
workers connect through ``BreakerConnection``, and a failed attempt is retried by the pool for
``POOL_RECONNECT_SECONDS`` only (a request's next checkout starts a fresh one). The rest is Django's.
"""

from __future__ import annotations

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.postgresql import base as postgresql
from django.utils.asyncio import async_unsafe
from psycopg import IsolationLevel

from achilles import dbguard

POOL_DEFAULT_TIMEOUT = 30.0  # psycopg_pool's own default for ``timeout``


class DatabaseWrapper(postgresql.DatabaseWrapper):
    def __init__(self, settings_dict, *args, **kwargs):
        options = settings_dict.setdefault("OPTIONS", {})
        pool = options.get("pool")
        if pool:
            options["pool"] = {
                "connection_class": dbguard.BreakerConnection,
                "reconnect_timeout": dbguard.POOL_RECONNECT_SECONDS,
                **({} if pool is True else pool),
            }
        super().__init__(settings_dict, *args, **kwargs)

    @async_unsafe
    def get_new_connection(self, conn_params):
        pool = self.pool
        if pool is None:
            if not dbguard.BREAKER.admit():
                raise dbguard.BREAKER.refuse()
            try:
                connection = super().get_new_connection(conn_params)
            except psycopg.OperationalError as exc:
                dbguard.BREAKER.failed(exc)
                raise
            dbguard.BREAKER.succeeded()
            return connection
        # Django's pooled path (postgresql.DatabaseWrapper.get_new_connection), the getconn() replaced.
        isolation_level = self.settings_dict["OPTIONS"].get("isolation_level")
        try:
            self.isolation_level = IsolationLevel(
                IsolationLevel.READ_COMMITTED if isolation_level is None else isolation_level
            )
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"Invalid transaction isolation level {isolation_level} specified. "
                "Use one of the psycopg.IsolationLevel values."
            ) from exc
        pool.open()
        timeout = self.settings_dict["OPTIONS"]["pool"].get("timeout", POOL_DEFAULT_TIMEOUT)
        connection = dbguard.checkout(pool.getconn, timeout=timeout)
        if isolation_level is not None:
            connection.isolation_level = self.isolation_level
        return connection
