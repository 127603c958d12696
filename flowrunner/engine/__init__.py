"""The engine every program shares: the worker that claims due runs under a lease
(``worker``), what each claimed step is given and may do (``claimed``, ``commands``,
``heartbeat``), operators' actions and queries (``actions``, ``operations_room``), runs
read for a diagram (``drawings``), and the loaders an application meets (``app_loader``,
``async_engines``)."""
