"""How a cluster names the engine sets it launches, in one place: every
placement builds the names here and ddpdemo.runtime.engines reads a
generation back from them.

    g<generation>-rank<r>   one engine set per rank (local, ssh)
    g<generation>           one set for the generation (a launcher's)
"""


def name(generation, rank=None):
    """The engine set id of a generation's engines (of one rank)."""
    return f"g{generation}" if rank is None else f"g{generation}-rank{rank}"


def generation_of(set_id):
    """The generation an engine set id names; None for a set id not
    made by name()."""
    head = set_id.split("-", 1)[0]
    if head[:1] != "g" or not head[1:].isdigit():
        return None
    return int(head[1:])
