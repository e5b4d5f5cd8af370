from runtime.batch.stages import plan


def stages(kinds: str):
    """'rrwr' → the planned stages as strings of call indexes."""
    calls = list(enumerate(kinds))
    return [
        ("P" if s.parallel else "O", "".join(str(i) for i, _ in s.calls))
        for s in plan(calls, lambda c: c[1] == "r")
    ]


def test_reads_between_writes_group_and_the_last_read_sees_the_write():
    assert stages("rrwr") == [("P", "01"), ("O", "2"), ("P", "3")]


def test_every_side_effect_is_its_own_ordered_step():
    assert stages("wwdu") == [("O", "0"), ("O", "1"), ("O", "2"), ("O", "3")]


def test_reads_never_move_across_a_write():
    assert stages("rwrrwr") == [("P", "0"), ("O", "1"), ("P", "23"), ("O", "4"), ("P", "5")]


def test_empty_and_all_reads():
    assert stages("") == []
    assert stages("rrrr") == [("P", "0123")]
