"""Development stand-ins for products that cannot run here (Jira, Confluence: their HTTP APIs, with demo data),
started by ``make run`` and the tests; not part of the product."""
