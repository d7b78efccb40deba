"""The recording proxy: an ASGI app in front of any engine (``app``), its lean HTTP/1.1 upstream
client (``upstream``), and the server that runs both and closes the capture on every path
(``server``). Imported as ``infertap.proxy``; the capture format it writes is ``infertap.capture``.
"""
