"""One word per concept (docs/design.md's glossary): a read of libvirt is a look, as a read of
Nova is. The option's old name is refused with its new one, exit 2, one line."""

from __future__ import annotations

import pytest

from tests.unit.config.test_absolute_instances_path import COMMANDS, refused, write


@pytest.mark.parametrize("command", list(COMMANDS))
def test_full_read_every_is_now_libvirt_full_look_every(tmp_path, capsys, command):
    conf = write(tmp_path / "n.conf", "[agent]\nfull_read_every = 3\n")
    line = refused(capsys, [*COMMANDS[command], "--config-file", conf])
    assert line.endswith(
        "[agent] full_read_every is not an option any more; it is now called "
        "libvirt_full_look_every"
    )
