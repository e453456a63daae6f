"""Data-quality layer: Great Expectations suites (``expectations/*.json``) as asset checks.

GX is imported lazily inside check bodies: importing it costs ~3 s, which the code
location, the CLI and most tests never pay.
"""
