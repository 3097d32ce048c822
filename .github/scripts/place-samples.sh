#!/usr/bin/env bash
# Lays Microsoft's AdventureWorks install script and data files out where the tests look for them
# (../shared/sample-databases/adventure-works-oltp beside the repository), as the project's own copy is: the
# seven data files that copy lacks are removed, so the tests meet the same script failures and empty tables
# (../shared/sample-databases/README.md on the project's machines; the counts are asserted against the stand-in).
#   .github/scripts/place-samples.sh FROM_DIR TO_DIR
set -euo pipefail
from="${1:?usage: place-samples.sh FROM_DIR TO_DIR}"
to="${2:?usage: place-samples.sh FROM_DIR TO_DIR}"
[ -f "$from/instawdb.sql" ] || { echo "place-samples.sh: no instawdb.sql in $from" >&2; exit 1; }
mkdir -p "$to"
cp -R "$from/." "$to/"
for missing in Person SalesOrderHeader SalesOrderDetail TransactionHistory TransactionHistoryArchive WorkOrder \
    WorkOrderRouting; do
    rm -f "$to/$missing.csv"
done
ls "$to" | wc -l
