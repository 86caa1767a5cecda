"""Install and run the real services Sluice's tests and demo need (stdlib only).

Each service is one module with a ``SERVICE`` object implementing
:class:`scripts.svc.base.Service`. ``scripts/services`` is the command line.
"""
