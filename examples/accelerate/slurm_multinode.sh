#!/usr/bin/env bash
# Multi-node `deep-nmt train` under SLURM: one launcher per node (srun), one process per GPU.
#
#   sbatch examples/accelerate/slurm_multinode.sh --data-dir data/wmt14 --src-lang en --tgt-lang de \
#       --output-dir /shared/out/en-de --variant dlcl --encoder-layers 18 --decoder-layers 6 --bf16
#   LAUNCHER=accelerate sbatch examples/accelerate/slurm_multinode.sh ...   # accelerate launch + ddp_multinode.yaml
#   DRY_RUN=1 SLURM_JOB_NODELIST='gpu[01-02]' SLURM_NNODES=2 SLURM_NODEID=0 SLURM_GPUS_ON_NODE=8 \
#       bash examples/accelerate/slurm_multinode.sh ...                    # print the commands, run nothing
#
# Everything after the script's name goes to `deep-nmt train` (`-m deep_nmt_hf.cli train`). Run it from the
# repository root (sbatch starts the job in the submission directory) with the environment that has
# deep_nmt_hf installed active; --output-dir must be on a file system every node sees.
#
# Rendezvous: MASTER_ADDR is the first host of SLURM_JOB_NODELIST (`scontrol show hostnames`, or the parser below
# where scontrol is absent), MASTER_PORT 29500 unless set.
#   LAUNCHER=torchrun (default): torchrun --nnodes N --nproc_per_node G --rdzv_backend c10d
#       --rdzv_endpoint MASTER_ADDR:MASTER_PORT --rdzv_id SLURM_JOB_ID: the same command on every node, ranks
#       assigned by the rendezvous.
#   LAUNCHER=accelerate: accelerate launch --config_file ACCELERATE_CONFIG (default ddp_multinode.yaml) with
#       --num_machines N --num_processes N·G --machine_rank SLURM_NODEID --main_process_ip MASTER_ADDR
#       --main_process_port MASTER_PORT (the config's static rendezvous; the rank is read on each node).
#
#SBATCH --job-name=deep-nmt
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=32
#SBATCH --time=48:00:00
#SBATCH --output=%x-%j.out

set -euo pipefail

# One host per line from a SLURM host list: "gpu[01-03,07],login-2,rack[1-2]-n[1-2]" (zero padding kept).
expand_nodelist() {
    local list=$1 item="" depth=0 i c
    for ((i = 0; i < ${#list}; i++)); do
        c=${list:i:1}
        if [[ $c == "[" ]]; then
            depth=$((depth + 1))
        elif [[ $c == "]" ]]; then
            depth=$((depth - 1))
        elif [[ $c == "," && $depth -eq 0 ]]; then
            expand_host "$item"
            item=""
            continue
        fi
        item+=$c
    done
    if [[ -n $item ]]; then
        expand_host "$item"
    fi
}

expand_host() {
    local host=$1 prefix rest ranges suffix range lo hi n
    local -a parts
    if [[ $host != *"["* ]]; then
        printf '%s\n' "$host"
        return
    fi
    prefix=${host%%\[*}
    rest=${host#*\[}
    ranges=${rest%%\]*}
    suffix=${rest#*\]}
    IFS=, read -ra parts <<<"$ranges"
    for range in "${parts[@]}"; do
        lo=${range%-*}
        hi=${range#*-}
        for ((n = 10#$lo; n <= 10#$hi; n++)); do
            expand_host "$(printf '%s%0*d%s' "$prefix" "${#lo}" "$n" "$suffix")"
        done
    done
}

hostnames() {
    if command -v scontrol >/dev/null 2>&1; then
        scontrol show hostnames "$1"
    else
        expand_nodelist "$1"
    fi
}

: "${SLURM_JOB_NODELIST:?not in a SLURM allocation: submit with sbatch (or set SLURM_* for DRY_RUN=1)}"
mapfile -t HOSTS < <(hostnames "$SLURM_JOB_NODELIST")
if [[ ${#HOSTS[@]} -eq 0 ]]; then
    echo "no hosts in SLURM_JOB_NODELIST='$SLURM_JOB_NODELIST'" >&2
    exit 2
fi
NNODES=${SLURM_NNODES:-${#HOSTS[@]}}
GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-${GPUS_PER_NODE:-1}}
GPUS_PER_NODE=${GPUS_PER_NODE##*:} # "a100:8" -> 8
MASTER_ADDR=${MASTER_ADDR:-${HOSTS[0]}}
MASTER_PORT=${MASTER_PORT:-29500}
LAUNCHER=${LAUNCHER:-torchrun}
ACCELERATE_CONFIG=${ACCELERATE_CONFIG:-examples/accelerate/ddp_multinode.yaml}
RDZV_ID=${SLURM_JOB_ID:-deep-nmt}
export MASTER_ADDR MASTER_PORT

case $LAUNCHER in
torchrun)
    node=(torchrun --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" --rdzv_id "$RDZV_ID"
        --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" -m deep_nmt_hf.cli train "$@")
    ;;
accelerate)
    node=(accelerate launch --config_file "$ACCELERATE_CONFIG" --num_machines "$NNODES"
        --num_processes "$((NNODES * GPUS_PER_NODE))" --machine_rank __NODE_RANK__
        --main_process_ip "$MASTER_ADDR" --main_process_port "$MASTER_PORT" -m deep_nmt_hf.cli train "$@")
    ;;
*)
    echo "LAUNCHER must be torchrun or accelerate, got '$LAUNCHER'" >&2
    exit 2
    ;;
esac

# the command each node runs, quoted for `bash -c`; the node rank is read on the node itself
command=$(printf '%q ' "${node[@]}")
command=${command//__NODE_RANK__/\$SLURM_NODEID}
step=(srun --nodes "$NNODES" --ntasks-per-node 1 --kill-on-bad-exit=1 bash -c "$command")

if [[ -n ${DRY_RUN:-} ]]; then
    echo "hosts: ${HOSTS[*]}"
    echo "rendezvous: MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT NNODES=$NNODES GPUS_PER_NODE=$GPUS_PER_NODE"
    printf 'step: %s\n' "$(printf '%q ' "${step[@]}")"
    printf 'node %s: %s\n' "${SLURM_NODEID:-0}" "${command//\$SLURM_NODEID/${SLURM_NODEID:-0}}"
    exit 0
fi
exec "${step[@]}"
