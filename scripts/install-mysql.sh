#!/usr/bin/env bash
# Installs MySQL's current LTS (9.7, from Debian's unstable suite) into a private root under the
# cache directory, once, and prints the path of its mysqld, so that
#   MOCO_TEST_MYSQLD=$(scripts/install-mysql.sh)
# points the tests, `moco local up --flavor mysql --server …` or anything else at it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/install.sh
ensure_mysql
echo "$MOCO_MYSQL_MYSQLD"
