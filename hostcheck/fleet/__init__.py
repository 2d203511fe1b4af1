"""Many hosts side by side: their reports (``reports``), what drifted on one host between two
audits (``drift``), and their reliability rehearsals (``watch``)."""
