"""What the market pays: Vast's offer search and market metrics, read with the owner's key.

``keys`` finds the key as vast-cli does, ``client`` makes bounded HTTP requests, ``parse`` turns
answers into offers and metrics, ``vast`` makes the queries of one snapshot, ``store`` records
snapshots in SQLite (system layer); ``summary`` and ``trend`` compute the percentiles and the trend
(judgement); ``render`` prints them. Nothing here runs unless the owner asks for the market.
"""
