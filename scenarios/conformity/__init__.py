"""Conformity: the Asch paradigm, with Social Impact Theory as the rule agents' model."""
