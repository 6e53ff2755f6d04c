"""Which files on the lines topic the worker reads as DOME's (streams/kafka/dome_paths.py)."""

from dpmstream.commands.stack.rsyslog import DOME_COPY
from dpmstream.streams.kafka.dome_paths import is_dome_path


def test_the_file_the_dome_drop_in_ships_and_the_packaged_dmlite_log_are_domes():
    assert is_dome_path(DOME_COPY.file)   # rsyslog/dpmstream-dome.conf's copy
    assert is_dome_path("/var/log/dmlite/dmlite-rfc3339.log")
    assert is_dome_path("/var/log/dmlite/dmlite.log")


def test_the_copy_kept_in_another_directory_is_read_as_domes_too():
    assert is_dome_path("/srv/node7/dmlite-rfc3339.log")


def test_the_dpm_daemons_logs_and_other_names_are_not():
    for path in ("/var/log/dpm/log", "/var/log/dpns/log", "/var/log/srmv2.2/log",
                 "/var/log/messages", "/var/log/dmlite/dmlite.log.1", "/var/log/dmlite/dmlite.logx",
                 "dmlite"):
        assert not is_dome_path(path), path
