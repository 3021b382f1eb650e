"""Orthogonal arrays pinned in a table, so that the designs in use never depend on a timed search.

:func:`~harnessgrid.designs.orthogonal_design` searches with OApackage under a time budget,
and on a busy machine the search can run out of it — once, under load, for the paper's own
3^5 space (issue 28). The arrays below are looked up before any search and have no time
budget: the paper's OA(18, 3^5, 2) in both variants (the micro space is 3^5 too), the
strength-3 arrays of 3^5, the mixed 3x3x4x3x3 space (a fourth observation level), and the
smaller 3-level arrays that the product construction of other mixed spaces is built from.

Each entry is exactly what the search returns when it is given all the time it needs (its
complete search finishes for every one of them), in the same row order;
``tests/test_orthogonal.py`` runs that search again for every entry and compares, and checks
that each is an orthogonal array of its strength. Rows are level indices in factor order,
written as digit strings. A space, strength or variant missing here is searched as before.
"""

from __future__ import annotations

Key = tuple[tuple[int, ...], int, str]
Rows = tuple[tuple[int, ...], ...]


def _rows(text: str) -> Rows:
    return tuple(tuple(int(c) for c in row) for row in text.split())


_NINE_3 = "000 011 022 101 112 120 202 210 221"
_NINE_4 = "0000 0111 0222 1012 1120 1201 2021 2102 2210"
_STRENGTH3_3_5 = """
    00000 00001 00110 00112 00221 00222 01011 01022 01101
    01120 01202 01210 02012 02020 02102 02121 02200 02211
    10011 10022 10101 10120 10202 10210 11000 11002 11111
    11112 11220 11221 12010 12021 12100 12122 12201 12212
    20012 20020 20102 20121 20200 20211 21010 21021 21100
    21122 21201 21212 22001 22002 22110 22111 22220 22222"""

#: (level counts in factor order, strength, variant) -> the rows of the array.
KNOWN_ARRAYS: dict[Key, Rows] = {
    ((3, 3, 3), 2, "min_aberration"): _rows(_NINE_3),
    ((3, 3, 3), 2, "local"): _rows(_NINE_3),
    ((3, 3, 3, 3), 2, "min_aberration"): _rows(_NINE_4),
    ((3, 3, 3, 3), 2, "local"): _rows(_NINE_4),
    # The paper's design: GWLP (A3, A4, A5) = (5, 7.5, 0).
    ((3, 3, 3, 3, 3), 2, "min_aberration"): _rows("""
        00000 00111 01012 01220 02122 02201 10022 10210 11121
        11202 12011 12100 20102 20221 21001 21110 22020 22212"""),
    ((3, 3, 3, 3, 3), 2, "local"): _rows("""
        00000 00011 01102 01121 02212 02220 10110 10202 11020
        11201 12022 12111 20122 20221 21012 21210 22001 22100"""),
    ((3, 3, 3, 3, 3), 3, "min_aberration"): _rows(_STRENGTH3_3_5),
    ((3, 3, 3, 3, 3), 3, "local"): _rows(_STRENGTH3_3_5),
    ((3, 3, 4, 3, 3), 2, "min_aberration"): _rows("""
        00000 00001 00002 00100 01111 01122 01220 01221 02212
        02310 02311 02322 10121 10222 10320 10321 11010 11011
        11012 11302 12102 12110 12200 12201 20112 20210 20211
        20312 21120 21202 21300 21301 22020 22021 22022 22101"""),
    ((3, 3, 4, 3, 3), 2, "local"): _rows("""
        00000 00001 00002 00100 01111 01122 01220 01222 02211
        02311 02312 02320 10121 10221 10321 10322 11010 11011
        11012 11300 12102 12110 12200 12202 20112 20210 20212
        20310 21120 21201 21301 21302 22020 22021 22022 22101"""),
}
