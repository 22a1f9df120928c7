"""The pure core: data model and classification. No I/O, no clock, no config objects."""
