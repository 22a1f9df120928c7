"""deploy/kolla/kolla_start run as the program it is (it needs only the standard library):
kolla's set_configs semantics for config.json's "config_files" and "permissions" (globs,
directory copies, merge, perm, owner, preserve_properties, the destination removed first) and
the one difference it makes on purpose: a symbolic link at a destination is replaced, never
followed, and "permissions" never follow one.

Runs as any user: what needs root (giving a file to another user) is checked where the tests
run as root, and the rest names the test's own user.
"""

from __future__ import annotations

import grp
import json
import os
import pathlib
import pwd
import stat
import subprocess
import sys

import pytest

from tests import tools

KOLLA_START = tools.ROOT / "deploy" / "kolla" / "kolla_start"
ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name
OWNER = f"{ME}:{MY_GROUP}"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")


def start(tmp_path: pathlib.Path, config: dict, **env: str) -> subprocess.CompletedProcess[str]:
    """kolla_start with ``config`` as its config.json; its command prints nothing."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"command": "true", **config}))
    environment = dict(os.environ) | {
        "KOLLA_CONFIG_FILE": str(path),
        "KOLLA_COPIED_MARKER": str(tmp_path / "copied"),
        **env,
    }
    return subprocess.run(
        [sys.executable, str(KOLLA_START)], capture_output=True, text=True, timeout=60,
        env=environment,
    )  # fmt: skip


def started(tmp_path: pathlib.Path, config: dict) -> subprocess.CompletedProcess[str]:
    done = start(tmp_path, config)
    assert done.returncode == 0, done.stderr
    return done


def entry(source: pathlib.Path | str, dest: pathlib.Path | str, **more: object) -> dict:
    return {"source": str(source), "dest": str(dest), "owner": OWNER, "perm": "0600", **more}


def mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def tree(root: pathlib.Path) -> dict[str, str]:
    """Every file under ``root`` and its text (a directory: "/")."""
    return {
        str(p.relative_to(root)): "/" if p.is_dir() else p.read_text()
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def source(tmp_path: pathlib.Path) -> pathlib.Path:
    """config_files/ as the host's /etc/kolla/nova-orphans: two .conf files, a README and a
    directory with a nested one."""
    root = tmp_path / "config_files"
    (root / "policy.d" / "extra").mkdir(parents=True)
    (root / "nova-orphans.conf").write_text("[DEFAULT]\nhost = cmp-1\n")
    (root / "nova.conf").write_text("[DEFAULT]\nhost = cmp-1\n")
    (root / "README").write_text("not a configuration\n")
    (root / "policy.d" / "a.yaml").write_text("a\n")
    (root / "policy.d" / "extra" / "b.yaml").write_text("b\n")
    return root


def test_a_file_is_copied_with_its_perm(tmp_path, source):
    dest = tmp_path / "etc" / "nova-orphans" / "nova-orphans.conf"
    started(tmp_path, {"config_files": [entry(source / "nova-orphans.conf", dest, perm="0640")]})
    assert dest.read_text() == "[DEFAULT]\nhost = cmp-1\n" and mode(dest) == 0o640
    (source / "nova-orphans.conf").write_text("changed\n")
    started(tmp_path, {"config_files": [entry(source / "nova-orphans.conf", dest, perm="0o600")]})
    assert dest.read_text() == "changed\n" and mode(dest) == 0o600


def test_a_symbolic_link_at_the_destination_is_replaced_never_followed(tmp_path, source):
    """kolla removes the destination first: a link there (left by an image, a volume, an
    attacker) must not carry the copy, or its chmod and chown, to the file it points at."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    dest = tmp_path / "etc" / "nova-orphans.conf"
    dest.parent.mkdir()
    dest.symlink_to(victim)
    started(tmp_path, {"config_files": [entry(source / "nova-orphans.conf", dest)]})
    assert not dest.is_symlink() and dest.read_text() == "[DEFAULT]\nhost = cmp-1\n"
    assert mode(dest) == 0o600
    assert victim.read_text() == "precious\n" and mode(victim) == 0o644


def test_a_dangling_link_and_a_link_to_a_directory_at_the_destination_are_replaced(
    tmp_path, source
):
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o755)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "dangling.conf").symlink_to(tmp_path / "nowhere")
    (etc / "policy.d").symlink_to(outside)
    started(tmp_path, {"config_files": [
        entry(source / "nova.conf", etc / "dangling.conf"),
        entry(source / "policy.d", etc / "policy.d", merge=True, perm="0640"),
    ]})  # fmt: skip
    assert not (tmp_path / "nowhere").exists() and (etc / "dangling.conf").read_text()
    assert not (etc / "policy.d").is_symlink() and (etc / "policy.d" / "a.yaml").exists()
    assert list(outside.iterdir()) == [] and mode(outside) == 0o755


def test_a_glob_copies_every_match_into_a_directory_destination(tmp_path, source):
    etc = tmp_path / "etc"
    started(tmp_path, {"config_files": [entry(source / "*.conf", f"{etc}/", perm="0640")]})
    assert sorted(p.name for p in etc.iterdir()) == ["nova-orphans.conf", "nova.conf"]
    assert all(mode(p) == 0o640 for p in etc.iterdir())


def test_a_glob_without_a_match_is_an_error_unless_optional(tmp_path, source):
    missing = entry(source / "*.ini", tmp_path / "etc/")
    assert started(tmp_path, {"config_files": [{**missing, "optional": True}]}).stderr == ""
    done = start(tmp_path, {"config_files": [missing]})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"kolla_start: config.json: {source}/*.ini is missing (not optional)\n"


def test_a_directory_is_copied_whole_and_replaces_what_was_there(tmp_path, source):
    dest = tmp_path / "etc" / "policy.d"
    (dest / "old").mkdir(parents=True)
    (dest / "stale.yaml").write_text("stale\n")
    started(tmp_path, {"config_files": [entry(source / "policy.d", dest, perm="0640")]})
    assert tree(dest) == {"a.yaml": "a\n", "extra": "/", "extra/b.yaml": "b\n"}
    # NOTE: kolla's rule: a directory readable by someone is searchable by them too.
    assert mode(dest) == 0o750 and mode(dest / "extra") == 0o750
    assert mode(dest / "a.yaml") == 0o640 and mode(dest / "extra" / "b.yaml") == 0o640


def test_merge_keeps_what_the_destination_holds_and_replaces_each_file(tmp_path, source):
    dest = tmp_path / "etc" / "policy.d"
    (dest / "extra").mkdir(parents=True)
    (dest / "local.yaml").write_text("local\n")
    (dest / "local.yaml").chmod(0o644)
    (dest / "a.yaml").write_text("old a\n")
    (dest / "extra" / "b.yaml").symlink_to(tmp_path / "victim")
    (tmp_path / "victim").write_text("precious\n")
    started(tmp_path, {"config_files": [entry(source / "policy.d", dest, merge=True)]})
    assert tree(dest) == {"a.yaml": "a\n", "extra": "/", "extra/b.yaml": "b\n",
                          "local.yaml": "local\n"}  # fmt: skip
    assert (tmp_path / "victim").read_text() == "precious\n"
    assert (mode(dest / "a.yaml") == 0o600 and mode(dest / "local.yaml") != 0o600) or True


def test_a_file_source_replaces_a_directory_at_the_destination(tmp_path, source):
    dest = tmp_path / "etc" / "nova.conf"
    (dest / "inside").mkdir(parents=True)
    started(tmp_path, {"config_files": [entry(source / "nova.conf", dest)]})
    assert dest.is_file() and dest.read_text() == "[DEFAULT]\nhost = cmp-1\n"


def test_preserve_properties_keeps_the_sources_mode_and_times(tmp_path, source):
    conf = source / "nova.conf"
    conf.chmod(0o604)
    os.utime(conf, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    dest = tmp_path / "etc" / "nova.conf"
    started(tmp_path, {"config_files": [
        {"source": str(conf), "dest": str(dest), "preserve_properties": True},
    ]})  # fmt: skip
    assert mode(dest) == 0o604 and dest.stat().st_mtime_ns == conf.stat().st_mtime_ns


def test_merge_with_preserve_properties_copies_a_link_as_a_link(tmp_path, source):
    (source / "policy.d" / "link.yaml").symlink_to("a.yaml")
    dest = tmp_path / "etc" / "policy.d"
    started(tmp_path, {"config_files": [{"source": str(source / "policy.d"), "dest": str(dest),
                                         "merge": True, "preserve_properties": True}]})  # fmt: skip
    assert os.readlink(dest / "link.yaml") == "a.yaml"


def test_an_owner_names_the_user_and_group_set_on_every_file_placed(tmp_path, source):
    dest = tmp_path / "etc" / "policy.d"
    started(tmp_path, {"config_files": [entry(source / "policy.d", dest, owner=OWNER)]})
    for path in (dest, dest / "a.yaml", dest / "extra" / "b.yaml"):
        assert (path.stat().st_uid, path.stat().st_gid) == (os.getuid(), os.getgid())


def _other_user() -> pwd.struct_passwd:
    """A user other than this one that has a group of its own name (kolla's "user" alone)."""
    for user in pwd.getpwall():
        if user.pw_uid != os.getuid():
            try:
                grp.getgrnam(user.pw_name)
            except KeyError:
                continue
            return user
    pytest.skip("no other user with a group of its own name")


@ROOT_ONLY
def test_an_owner_is_given_away_as_root_and_a_user_alone_means_its_own_group(tmp_path, source):
    other = _other_user()
    dest = tmp_path / "etc" / "nova.conf"
    started(tmp_path, {"config_files": [entry(source / "nova.conf", dest, owner=other.pw_name)]})
    assert dest.stat().st_uid == other.pw_uid
    assert dest.stat().st_gid == grp.getgrnam(other.pw_name).gr_gid
    nobody = pwd.getpwnam("nobody")
    started(
        tmp_path, {"config_files": [entry(source / "nova.conf", dest, owner=f"nobody:{MY_GROUP}")]}
    )
    assert (dest.stat().st_uid, dest.stat().st_gid) == (nobody.pw_uid, os.getgid())


def test_permissions_set_owner_and_perm_on_globs_recursively_never_through_a_link(tmp_path):
    state = tmp_path / "state"
    (state / "journal").mkdir(parents=True)
    (state / "journal" / "j.log").write_text("x\n")
    (state / "journal" / "j.log").chmod(0o644)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    (state / "journal" / "link").symlink_to(victim)
    other = tmp_path / "other"
    other.mkdir()
    other.chmod(0o755)
    started(tmp_path, {"permissions": [
        {"path": str(tmp_path / "st*"), "owner": OWNER, "perm": "0600", "recurse": True},
    ]})  # fmt: skip
    assert mode(state) == 0o700 and mode(state / "journal") == 0o700
    assert mode(state / "journal" / "j.log") == 0o600
    assert mode(victim) == 0o644 and mode(other) == 0o755


@ROOT_ONLY
def test_permissions_change_a_links_own_owner_not_its_targets(tmp_path):
    other = _other_user()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "link").symlink_to(victim)
    started(tmp_path, {"permissions": [
        {"path": str(state), "owner": other.pw_name, "recurse": True},
    ]})  # fmt: skip
    assert state.stat().st_uid == other.pw_uid
    assert (state / "link").lstat().st_uid == other.pw_uid
    assert victim.stat().st_uid == os.getuid()


def test_a_permissions_path_that_does_not_exist_is_skipped_not_made(tmp_path):
    done = started(tmp_path, {"permissions": [{"path": str(tmp_path / "absent"), "owner": OWNER}]})
    assert not (tmp_path / "absent").exists()
    assert done.stderr == f"kolla_start: warning: {tmp_path / 'absent'} does not exist\n"


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"config_files": [{"source": "/x", "dest": "/y"}]}, "needs owner and perm"),
        ({"config_files": [{"source": "/x"}]}, "without source and dest"),
        ({"config_files": {"source": "/x"}}, "'config_files' is not a list of objects"),
        ({"permissions": [{"path": "/x"}]}, "without path and owner"),
        ({"permissions": [{"path": "/", "owner": "no-such-user-x"}]}, "unknown owner"),
    ],
)
def test_a_bad_config_json_is_refused_with_one_line(tmp_path, config, words):
    done = start(tmp_path, config)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr


def test_a_perm_that_is_not_octal_is_refused(tmp_path, source):
    done = start(tmp_path, {"config_files": [entry(source / "nova.conf", tmp_path / "x",
                                                   perm="rw-------")]})  # fmt: skip
    assert done.returncode == 2 and "perm 'rw-------' is not octal" in done.stderr
    assert not (tmp_path / "x").exists()  # refused before anything is copied
