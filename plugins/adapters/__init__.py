"""Built-in adapters: black-box emulations of real agent shells (``adapter:NAME``)."""
