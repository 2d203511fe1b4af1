"""The host firewall, judged from the ruleset the collectors record (pure code, no I/O).

``ruleset``: what of ``nft -j list ruleset`` / ``iptables-save`` is kept as facts;
``summary``: the effective input/forward policy and whether Docker's forward path is filtered
(NET-1010, DOC-1070); ``egress``: whether a container reaches the owner's network (ISO-1040).
A saved facts file is re-judged with today's rules, as the CGNAT verdict is.
"""
