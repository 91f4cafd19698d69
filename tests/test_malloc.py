"""edgesim.learning.malloc: glibc keeps freed memory unless the user opts out."""

from edgesim.learning.malloc import ENV, enabled, keep_freed_memory


def test_opt_out_values():
    assert enabled({}) and enabled({ENV: "1"})
    for off in ("0", "false", "No", "OFF"):
        assert not enabled({ENV: off})
        assert keep_freed_memory({ENV: off}) is False


def test_keep_freed_memory_on_glibc():
    import platform

    got = keep_freed_memory({})
    if platform.libc_ver()[0] == "glibc":
        assert got is True
