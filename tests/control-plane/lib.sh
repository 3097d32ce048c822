# Shared helpers of up.sh and down.sh (sourced, not run).

# A free TCP port on 127.0.0.1, below the kernel's ephemeral range (32768+) so an outgoing connection cannot
# take it between now and the bind. Ports handed out in this shell are not handed out twice.
_used_ports=" "
free_port() {
	local port tries=0
	while ((tries++ < 200)); do
		port=$((20000 + RANDOM % 12000))
		[[ "$_used_ports" == *" $port "* ]] && continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			_used_ports+="$port "
			echo "$port"
			return 0
		fi
	done
	echo "free_port: no free port found" >&2
	return 1
}

# start_bg DIR NAME CMD...: runs CMD detached (own session, so the caller's Ctrl-C or timeout does not kill
# it), logs to DIR/logs/NAME.log and records "NAME PID" in DIR/pids.
start_bg() {
	local dir="$1" name="$2"
	shift 2
	# Not a process-group leader here, so setsid execs in place and $! is the component's own pid.
	setsid "$@" </dev/null >>"$dir/logs/$name.log" 2>&1 &
	echo "$name $!" >>"$dir/pids"
}

pid_of() { awk -v n="$2" '$1==n{print $2}' "$1/pids" 2>/dev/null | tail -n 1; }

# wait_for DIR NAME TIMEOUT CMD...: polls CMD until it succeeds; fails early if NAME's process died.
wait_for() {
	local dir="$1" name="$2" timeout="$3" pid deadline
	shift 3
	pid="$(pid_of "$dir" "$name")"
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
			echo "up.sh: error: $name exited during startup (see $dir/logs/$name.log)" >&2
			return 1
		fi
		if ((SECONDS >= deadline)); then
			echo "up.sh: error: $name not ready after ${timeout}s (see $dir/logs/$name.log)" >&2
			return 1
		fi
		sleep 0.3
	done
}

# is_ours PID NAME: the pid still runs the component NAME (pids get reused, e.g. after a reboot).
is_ours() {
	local exe
	exe="$(readlink "/proc/$1/exe" 2>/dev/null)" || return 1
	exe="${exe% (deleted)}"
	[[ "${exe##*/}" == "$2" ]]
}

# all_alive PIDS_FILE: every recorded process still runs.
all_alive() {
	local name pid
	while read -r name pid; do
		[[ -n "$pid" ]] && is_ours "$pid" "$name" || return 1
	done <"$1"
}

# write_kubeconfig FILE SERVER CA_FILE USER TOKEN
write_kubeconfig() {
	local file="$1" server="$2" ca="$3" user="$4" token="$5"
	(
		umask 077
		cat >"$file" <<-EOF
			apiVersion: v1
			kind: Config
			clusters:
			- name: loopback
			  cluster:
			    server: $server
			    certificate-authority-data: $(base64 -w0 "$ca")
			users:
			- name: $user
			  user:
			    token: $token
			contexts:
			- name: $user@loopback
			  context:
			    cluster: loopback
			    user: $user
			    namespace: default
			current-context: $user@loopback
		EOF
	)
}
