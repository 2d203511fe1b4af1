"""The offer preview as HTML: each field Vast shows a renter, its value and how it is known
(the rows of :func:`hostcheck.render.offer.render_offer`)."""

from __future__ import annotations

from hostcheck.measure.offer import Label, Offer
from hostcheck.render.html.markup import Markup, el
from hostcheck.render.html.page import fold, table
from hostcheck.render.offer import _value


def offer_section(offer: Offer) -> Markup:
    rows = [[el("code", f.name), _value(f.value, f.unit), str(f.label), f.how] for f in offer.fields]
    later = [f.name for f in offer.fields if f.label is Label.NOT_BEFORE_LISTING]
    return fold("The offer a Vast renter would see",
                table(["field", "value", "label", "how"], rows),
                el("p", "Not measurable before listing: " + ", ".join(later) + " (Vast computes or observes them "
                        "once the machine is listed).") if later else None,
                el("ul", [el("li", note) for note in offer.notes]) if offer.notes else None)
