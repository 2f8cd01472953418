#!/bin/sh
# Run once by the postgres image on a fresh primary (docker-entrypoint-initdb.d): the standby connects
# for streaming replication as the same user, with the same password (scram).
set -eu
echo "host replication ${POSTGRES_USER} all scram-sha-256" >> "$PGDATA/pg_hba.conf"
