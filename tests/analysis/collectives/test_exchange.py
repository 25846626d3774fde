"""The all-to-all rank-pair matrix from torch's recorded split sizes, on calls built by hand: exact bytes per pair,
and split texts that do not fit their group (a peer too many, negative or unreadable sizes, ranks past int64)
left out and said rather than spread evenly or sent to a rank that does not exist."""

from __future__ import annotations

import pandas as pd

from tracekit.analysis.collectives.exchange import exchange_matrix


def calls(*rows: tuple) -> pd.DataFrame:
    """Each row: (sending rank, bytes, split text, group ranks text, group size); all of them all_to_all calls."""
    frame = pd.DataFrame(rows, columns=["rank", "bytes", "in_split", "group_ranks", "ranks"])
    return frame.assign(recorded="all_to_all")


def test_each_pair_gets_its_rows_share_of_the_calls_bytes():
    """Rank 0 sends 4,096 bytes split [1, 3] to global ranks 4 and 6 (1,024 and 3,072), twice; rank 1 sends 2,048
    bytes with no split written ("[]": even, 1,024 each)."""
    matrix, notes = exchange_matrix(
        calls(
            (0, 4096, "[1, 3]", "[4, 6]", 2),
            (0, 4096, "[1, 3]", "[4, 6]", 2),
            (1, 2048, "[]", "[4, 6]", 2),
        )
    )
    assert list(zip(matrix["Sender"], matrix["Receiver"], matrix["Bytes"], matrix["Calls"])) == [
        (0, 4, 2048, 2),
        (0, 6, 6144, 2),
        (1, 4, 1024, 1),
        (1, 6, 1024, 1),
    ]
    assert notes == []


def test_splits_that_do_not_fit_their_group_are_left_out_and_said():
    """A group of two: a split of three peers, negative sizes, an unreadable text and a rank past int64 are left
    out (no rank 2 invented, nothing spread evenly); the one good call remains."""
    matrix, notes = exchange_matrix(
        calls(
            (0, 4096, "[1, 2, 3]", "[0, 1]", 2),
            (0, 4096, "[-5, 5]", "[0, 1]", 2),
            (0, 4096, "[1, x]", "[0, 1]", 2),
            (0, 4096, "[1, 1]", "[99999999999999999999999, 1]", 2),
            (1, 4096, "[1, 1]", "[0, 1]", 2),
        )
    )
    assert list(zip(matrix["Sender"], matrix["Receiver"], matrix["Bytes"])) == [(1, 0, 2048), (1, 1, 2048)]
    assert notes == [
        "4 of 5 all-to-all calls with recorded sizes are left out of the exchange table: their split sizes or "
        "group ranks do not fit their group (as written: [1, 2, 3] over [0, 1])"
    ]
