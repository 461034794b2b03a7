"""Paper 003 (geographic spines): OSED, spine optimization, Census-style TopDown."""
