#!/bin/sh
# on-one-rank.sh RANK COMMAND OTHERS: under Open MPI's mpirun the process of
# rank RANK runs COMMAND and every other process runs OTHERS (each split into
# words): a rank that sees other options, environment or files than the
# rest, as when a launcher does not forward a variable to another machine.
if [ "${OMPI_COMM_WORLD_RANK:-$PMIX_RANK}" = "$1" ]; then
  exec $2
fi
exec $3
