"""Files shipped with the package: the sample configuration, the systemd unit, the Nova policy
rules, and (linked from deploy/ and docs/schema/) the alert rules, the Grafana dashboard and the
JSON report's schema."""
