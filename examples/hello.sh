# Runs in a fresh sandbox: no network, a read-only root, uid 1000,
# /workspace as the working directory. `bin/airlock run examples/hello.sh`
echo "hello from $(pwd) as uid $(id -u)"
echo "network interfaces: $(ls /sys/class/net | tr '\n' ' ')"
printf 'a,b\n1,2\n' > data.csv
wc -l < data.csv
