#!/bin/sh
# csvsum: print the sum of one column of a CSV read from stdin.
# usage: sh csvsum.sh COLUMN < file.csv   (COLUMN counts from 1)
col="$1"
case "$col" in
  ''|*[!0-9]*) echo "usage: csvsum.sh COLUMN < file.csv" >&2; exit 2 ;;
esac
awk -F, -v col="$col" '{ s += $col } END { print s }'
