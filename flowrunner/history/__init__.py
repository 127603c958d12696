"""A run's history in sentences: a flow's lines (``flows``), the other programs' lines
(``programs``), and moments, names, ordinals and values in words (``words``). Pure."""
