"""Measurements built on top of the audit's facts: power draw, and the offer a renter would see.

Modules here are pure: they turn facts and readings taken by collectors into figures that say
how each was obtained (measured, estimated, given by the user, or unknown and why).
"""
