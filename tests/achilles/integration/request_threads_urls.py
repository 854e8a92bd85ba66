"""A URLconf for test_request_threads: sync views that report the thread they ran on."""

import threading

from django.db import connection
from django.http import JsonResponse
from django.urls import path


def probe(request):
    # What this request found in its thread, then a query that leaves the thread's connection open
    # (as any sync view does): the end of the request must give it back.
    found_open = connection.connection is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    return JsonResponse({"thread": threading.get_ident(), "found_open": found_open, "backend": pid})


# The test's three concurrent requests meet here: only requests running side by side can (requests
# queued behind one another would wait out the timeout, and the broken barrier fails them all).
MEETING = threading.Barrier(3, timeout=60)


def slow(request):
    MEETING.wait()
    return JsonResponse({"thread": threading.get_ident()})


urlpatterns = [path("probe", probe), path("slow", slow)]
