"""Indirect reciprocity: random donor-recipient encounters judged by a social norm.

Donors help recipients at a cost ``c`` for a benefit ``b``; observers judge each act by
image scoring, standing or stern judging and keep (public or private) reputations that
discriminators condition on (Nowak & Sigmund 1998; Ohtsuki & Iwasa 2004).
"""
