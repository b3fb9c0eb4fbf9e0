# Runs in a fresh sandbox: a read-only root, uid 1000, /workspace as the
# working directory, no network. `bin/airlock run examples/hello.sh`
echo "hello from $(cat /proc/sys/kernel/hostname):$(pwd) as uid $(id -u)"
printf 'a,b\n1,2\n' > data.csv
echo "data.csv has $(wc -l < data.csv) lines"
touch /etc/x 2>/dev/null || echo "the root file system is read-only"
