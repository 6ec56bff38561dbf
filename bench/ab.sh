#!/usr/bin/env bash
# A/B on this shared machine: the same bench suites on two checkouts,
# alternating A B A B ... so drift hits both; compare the cpu us/req column.
#   bench/ab.sh DIR_A DIR_B [suites, default database,functions] [rounds, default 2]
# A checkout made with `git worktree add /tmp/a <rev>` can share this
# checkout's node_modules: `ln -s "$PWD/node_modules" /tmp/a/node_modules`.
set -euo pipefail
a=$1 b=$2 suites=${3:-database,functions} rounds=${4:-2}
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    dir=$a; [ "$side" = B ] && dir=$b
    (cd "$dir" && npm run bench -- --duration 5 --only "$suites" 2>/dev/null) \
      | grep -E '^(bare Fastify|SELECT|/api|GET|POST|CMS|trivial|events)' | sed "s/^/$side$round  /"
  done
done
