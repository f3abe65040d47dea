"""The built-in web console (/console): HTML pages over the same services as the API.

HTTP only, beside `app.api` in the layers: every read and action calls the service
functions the API routes call (threads, runs, assistants, Store), with the caller's tenant.
Templates and assets ship inside the package; nothing is fetched from the network.
"""
