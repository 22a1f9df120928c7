"""Files shipped with the package: the sample configuration and the systemd unit."""
