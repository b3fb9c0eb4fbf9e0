package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// BinEnv names the weed binary when it is not at DefaultBin or on PATH.
const BinEnv = "AIRLOCK_TEST_WEED"

// DefaultBin is where scripts/setup.sh installs weed.
const DefaultBin = "/usr/local/lib/airlock/bin/weed"

// Region is the region the server and its clients are told.
const Region = "us-east-1"

// Server is a running SeaweedFS with its S3 gateway.
type Server struct {
	// Endpoint is the S3 gateway's base URL (http://127.0.0.1:PORT).
	Endpoint string
	// Bucket is the bucket made at start.
	Bucket string
	// AccessKey and SecretKey are the one identity it accepts (admin).
	AccessKey, SecretKey string
}

// BucketURL is the s3blobs URL of the bucket, with extra query
// parameters (e.g. "prefix=a/") appended.
func (s *Server) BucketURL(extra ...string) string {
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", Region)
	q.Set("use_path_style", "true")
	u := "s3://" + s.Bucket + "?" + q.Encode()
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// Env is the environment a client process needs for the credentials.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey, "AWS_REGION=" + Region}
}

// SetEnv sets the credentials in this process's environment for the
// test (t.Setenv: the test must not be parallel).
func (s *Server) SetEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_REGION", Region)
	// No shared config file of the machine may change what the test uses.
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Client is an S3 client of the server (for what airlock.Blobs cannot
// say: listing, making buckets).
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// Bin returns the weed binary, or skips the test (through testreq) when
// there is none.
func Bin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			testreq.Skipf(t, "%s=%s: %v", BinEnv, p, err)
		}
		return p
	}
	if _, err := os.Stat(DefaultBin); err == nil {
		return DefaultBin
	}
	if p, err := exec.LookPath("weed"); err == nil {
		return p
	}
	testreq.Skipf(t, "SeaweedFS (weed) is not installed at %s or on PATH (scripts/setup.sh builds it; or set %s)", DefaultBin, BinEnv)
	return ""
}

// Start starts a SeaweedFS server with its S3 gateway and one bucket, and
// waits until the bucket takes requests; the cleanup ends the server and
// removes its data.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Bin(t)
	dir := t.TempDir()
	s := &Server{Bucket: "airlock-test", AccessKey: "AKAIRLOCKTEST" + randHex(4), SecretKey: randHex(20)}
	cfg := map[string]any{"identities": []any{map[string]any{
		"name":        "airlock",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}}
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	// Eight ports: master, volume, filer and S3, each with its gRPC port.
	ports := freePorts(t, 8)
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(ports[3])
	args := []string{"server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.port=" + strconv.Itoa(ports[0]), "-master.port.grpc=" + strconv.Itoa(ports[4]),
		"-master.telemetry=false", "-master.volumeSizeLimitMB=64",
		"-master.electionTimeout=1s", // one master: no need to wait for peers
		"-volume.preStopSeconds=0",   // stop at once at cleanup
		"-volume.port=" + strconv.Itoa(ports[1]), "-volume.port.grpc=" + strconv.Itoa(ports[5]), "-volume.max=16",
		"-filer", "-filer.port=" + strconv.Itoa(ports[2]), "-filer.port.grpc=" + strconv.Itoa(ports[6]),
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
		"-s3", "-s3.port=" + strconv.Itoa(ports[3]), "-s3.port.grpc=" + strconv.Itoa(ports[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false",
		"-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
		"-s3.config=" + cfgPath,
	}
	logPath := filepath.Join(dir, "weed.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "HOME="+dir) // it may write config under HOME
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start weed: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		logf.Close()
		// weed also listens on unix sockets in /tmp named after its gRPC
		// ports, and may leave them.
		for _, port := range ports[4:] {
			for _, role := range []string{"master", "volume", "filer", "s3"} {
				os.Remove(filepath.Join(os.TempDir(), "seaweedfs-"+role+"-grpc-"+strconv.Itoa(port)+".sock"))
			}
		}
		if t.Failed() {
			tailLog(t, logPath)
		}
	})

	// Ready when the bucket can be made (the gateway answers before the
	// filer and volume server behind it are ready).
	client := s.Client()
	var lastErr error
	ok := testreq.Poll(90*time.Second, func() bool {
		select {
		case <-exited:
			lastErr = errors.New("weed exited")
			return true
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, lastErr = client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
		if lastErr != nil {
			var owned interface{ ErrorCode() string }
			if errors.As(lastErr, &owned) && (owned.ErrorCode() == "BucketAlreadyOwnedByYou" || owned.ErrorCode() == "BucketAlreadyExists") {
				lastErr = nil
			}
		}
		if lastErr != nil {
			return false
		}
		// And an object can be written and read back.
		_, lastErr = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(".ready"), Body: bytes.NewReader([]byte("ok"))})
		if lastErr == nil {
			_, lastErr = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(".ready")})
		}
		return lastErr == nil
	})
	if !ok || lastErr != nil {
		tailLog(t, logPath)
		t.Fatalf("SeaweedFS S3 gateway at %s not ready: %v", s.Endpoint, lastErr)
	}
	return s
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago (held open until all are chosen, so they differ).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func tailLog(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	t.Logf("weed log (last 4000 bytes):\n%s", b)
}
