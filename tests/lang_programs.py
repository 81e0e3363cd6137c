"""Programs in each compiled language, for the language and adversarial tests: one per behaviour.

`PROGRAMS[language][kind]`: `right` prints the sum of the two integers on stdin, `wrong` the sum
plus one, `broken` does not compile, `loop` never ends, `memory` allocates (and touches) 2 GiB,
`network` tries to connect out and prints what happened, `fork` starts processes until refused
and prints `contained`, `file` writes 2 GiB to a file, `signal` sends SIGKILL to its parent, the
namespace's init (and, where the language has the call, `kill(-1)`), then prints `alive`,
`shadow` reads /etc/shadow.
"""

from __future__ import annotations

RIGHT_TESTS = {"stdio": [{"input": "1 2\n", "output": "3\n"}, {"input": "-5 5", "output": "0"}]}

JAVA = {
    "right": """
import java.util.*;
public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        long a = in.nextLong(), b = in.nextLong();
        System.out.println(a + b);
    }
}
""",
    "wrong": """
import java.util.*;
class Solution {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        System.out.println(in.nextLong() + in.nextLong() + 1);
    }
}
""",
    "broken": "public class Main { public static void main(String[] a) { int x = ; } }",
    "loop": "public class Main { public static void main(String[] a) { long x = 0; "
    "while (true) { x++; } } }",
    "memory": """
import java.util.*;
public class Main {
    public static void main(String[] a) {
        List<long[]> keep = new ArrayList<>();
        for (int i = 0; i < 2048; i++) {
            long[] b = new long[131072];
            Arrays.fill(b, i);
            keep.add(b);
        }
        System.out.println(keep.size());
    }
}
""",
    "network": """
import java.net.*;
public class Main {
    public static void main(String[] a) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("1.1.1.1", 53), 2000);
            System.out.println("connected");
        } catch (Exception e) { System.out.println("blocked"); }
    }
}
""",
    "fork": """
import java.util.*;
public class Main {
    public static void main(String[] a) throws Exception {
        List<Process> ps = new ArrayList<>();
        try {
            for (int i = 0; i < 500; i++) ps.add(new ProcessBuilder("sleep", "30").start());
            System.out.println("not contained " + ps.size());
        } catch (Exception | Error e) { System.out.println("contained"); }
        for (Process p : ps) p.destroyForcibly();
    }
}
""",
    "file": """
import java.io.*;
public class Main {
    public static void main(String[] a) {
        byte[] mb = new byte[1 << 20];
        try (FileOutputStream f = new FileOutputStream("big")) {
            for (int i = 0; i < 2048; i++) f.write(mb);
            System.out.println("wrote 2 GiB");
        } catch (IOException e) { System.out.println("refused"); }
    }
}
""",
    "signal": """
public class Main {
    public static void main(String[] a) throws Exception {
        ProcessHandle.of(1).ifPresent(ProcessHandle::destroyForcibly);
        ProcessHandle.current().parent().ifPresent(ProcessHandle::destroyForcibly);
        Thread.sleep(200);
        System.out.println("alive");
    }
}
""",
    "shadow": """
import java.nio.file.*;
public class Main {
    public static void main(String[] a) {
        try { Files.readAllBytes(Paths.get("/etc/shadow")); System.out.println("read"); }
        catch (Exception e) { System.out.println("unreadable"); }
    }
}
""",
}

JAVASCRIPT = {
    "right": """
const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(BigInt);
console.log(String(a + b));
""",
    "wrong": """
const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);
console.log(a + b + 1);
""",
    "broken": "function f( { return 1; }\n",
    "loop": "let x = 0; while (true) { x++; }\n",
    "memory": """
const keep = [];
for (let i = 0; i < 2048; i++) { keep.push(Buffer.alloc(1 << 20, i)); }
console.log(keep.length);
""",
    "network": """
const s = require('net').connect({host: '1.1.1.1', port: 53, timeout: 2000});
s.on('connect', () => { console.log('connected'); s.destroy(); });
s.on('error', () => console.log('blocked'));
s.on('timeout', () => { console.log('blocked'); s.destroy(); });
""",
    "fork": """
const cp = require('child_process');
const ps = [];
try {
  for (let i = 0; i < 500; i++) {
    const p = cp.spawn('sleep', ['30']);
    p.on('error', () => {});
    ps.push(p);
  }
} catch (e) {}
setTimeout(() => {
  const alive = ps.filter(p => p.pid !== undefined).length;
  console.log(alive < 500 ? 'contained' : 'not contained ' + alive);
  ps.forEach(p => { try { p.kill('SIGKILL'); } catch (e) {} });
  process.exit(0);
}, 500);
""",
    "file": """
const fs = require('fs');
const mb = Buffer.alloc(1 << 20);
try {
  const fd = fs.openSync('big', 'w');
  for (let i = 0; i < 2048; i++) fs.writeSync(fd, mb);
  console.log('wrote 2 GiB');
} catch (e) { console.log('refused'); }
""",
    "signal": """
try { process.kill(1, 'SIGKILL'); } catch (e) {}
try { process.kill(-1, 'SIGKILL'); } catch (e) {}
console.log('alive');
""",
    "shadow": """
try { require('fs').readFileSync('/etc/shadow'); console.log('read'); }
catch (e) { console.log('unreadable'); }
""",
}

GO = {
    "right": """
package main

import "fmt"

func main() {
	var a, b int64
	fmt.Scan(&a, &b)
	fmt.Println(a + b)
}
""",
    "wrong": """
package main

import "fmt"

func main() {
	var a, b int64
	fmt.Scan(&a, &b)
	fmt.Println(a + b + 1)
}
""",
    "broken": "package main\n\nfunc main() { x := }\n",
    "loop": "package main\n\nfunc main() {\n\tx := 0\n\tfor {\n\t\tx++\n\t}\n}\n",
    "memory": """
package main

import "fmt"

func main() {
	keep := [][]byte{}
	for i := 0; i < 2048; i++ {
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte(i)
		}
		keep = append(keep, b)
	}
	fmt.Println(len(keep))
}
""",
    "network": """
package main

import (
	"fmt"
	"net"
	"time"
)

func main() {
	c, err := net.DialTimeout("tcp", "1.1.1.1:53", 2*time.Second)
	if err != nil {
		fmt.Println("blocked")
		return
	}
	c.Close()
	fmt.Println("connected")
}
""",
    "fork": """
package main

import (
	"fmt"
	"os/exec"
)

func main() {
	var ps []*exec.Cmd
	contained := false
	for i := 0; i < 500; i++ {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			contained = true
			break
		}
		ps = append(ps, c)
	}
	for _, c := range ps {
		c.Process.Kill()
	}
	if contained {
		fmt.Println("contained")
	} else {
		fmt.Println("not contained")
	}
}
""",
    "file": """
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signal.Ignore(syscall.SIGXFSZ)
	f, err := os.Create("big")
	if err != nil {
		fmt.Println("refused")
		return
	}
	mb := make([]byte, 1<<20)
	for i := 0; i < 2048; i++ {
		if _, err := f.Write(mb); err != nil {
			fmt.Println("refused")
			return
		}
	}
	fmt.Println("wrote 2 GiB")
}
""",
    "signal": """
package main

import (
	"fmt"
	"syscall"
)

func main() {
	syscall.Kill(1, syscall.SIGKILL)
	syscall.Kill(-1, syscall.SIGKILL)
	fmt.Println("alive")
}
""",
    "shadow": """
package main

import (
	"fmt"
	"os"
)

func main() {
	if _, err := os.ReadFile("/etc/shadow"); err != nil {
		fmt.Println("unreadable")
		return
	}
	fmt.Println("read")
}
""",
}

RUST = {
    "right": """
use std::io::Read;
fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<i64> = s.split_whitespace().map(|t| t.parse().unwrap()).collect();
    println!("{}", v[0] + v[1]);
}
""",
    "wrong": """
use std::io::Read;
fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<i64> = s.split_whitespace().map(|t| t.parse().unwrap()).collect();
    println!("{}", v[0] + v[1] + 1);
}
""",
    "broken": 'fn main() { let x: i32 = "no"; }\n',
    "loop": "fn main() { let mut x: u64 = 1; loop { x = x.wrapping_mul(3); "
    'if x == 0 { println!("{}", x); } } }\n',
    "memory": """
fn main() {
    let mut keep: Vec<Vec<u8>> = Vec::new();
    for i in 0..2048 { keep.push(vec![(i % 251) as u8 + 1; 1 << 20]); }
    println!("{}", keep.len());
}
""",
    "network": """
use std::net::{TcpStream, SocketAddr};
use std::time::Duration;
fn main() {
    let addr: SocketAddr = "1.1.1.1:53".parse().unwrap();
    match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
        Ok(_) => println!("connected"),
        Err(_) => println!("blocked"),
    }
}
""",
    "fork": """
use std::process::{Command, Child};
fn main() {
    let mut ps: Vec<Child> = Vec::new();
    let mut contained = false;
    for _ in 0..500 {
        match Command::new("sleep").arg("30").spawn() {
            Ok(c) => ps.push(c),
            Err(_) => { contained = true; break; }
        }
    }
    for p in ps.iter_mut() { let _ = p.kill(); }
    println!("{}", if contained { "contained" } else { "not contained" });
}
""",
    "file": """
use std::io::Write;
fn main() {
    let mb = vec![0u8; 1 << 20];
    let mut f = match std::fs::File::create("big") {
        Ok(f) => f,
        Err(_) => { println!("refused"); return; }
    };
    for _ in 0..2048 {
        if f.write_all(&mb).is_err() { println!("refused"); return; }
    }
    println!("wrote 2 GiB");
}
""",
    "signal": """
use std::process::Command;
fn main() {
    let _ = Command::new("kill").args(["-9", "1"]).status();
    std::thread::sleep(std::time::Duration::from_millis(200));
    println!("alive");
}
""",
    "shadow": """
fn main() {
    match std::fs::read("/etc/shadow") {
        Ok(_) => println!("read"),
        Err(_) => println!("unreadable"),
    }
}
""",
}

PROGRAMS: dict[str, dict[str, str]] = {
    "java": JAVA,
    "javascript": JAVASCRIPT,
    "go": GO,
    "rust": RUST,
}
COMPILED = tuple(PROGRAMS)
