"""Clients that can't be re-pointed: the mitmproxy addon that records through an HTTPS proxy
(``addon``, run by ``run``), and the importer of HAR files and mitmproxy flow dumps (``importer``).
Both hand exchanges to the same capture writer as the recording proxy."""
