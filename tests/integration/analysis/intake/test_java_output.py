"""What Java really prints of records, maps and `Properties` holding a password: the whole value goes, whatever
characters it holds, and the names and other values stay."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.redacting import redacted

# Password policies ask for symbols: each of these once cut a value short and left the rest.
PASSWORDS = ("Tr0ub4dor&3xQ", "aB3;dE6fG9hJ", "x7(Qp)Lm2Vz9", "Zq8{vL2}mN4p", "R7<tY>3uI9oP", "j4,Kd8,Lq2Mz",
             "h7[Gf3]Ks9Q", "Ab3 Cd6 Ef9", "Monkey(7)x&y9")
_PROGRAM = """
import java.util.*;
public class Printed {
  record Creds(String username, String password) {}
  public static void main(String[] args) {
    for (String pw : args) {
      System.out.println(new Creds("svc", pw));
      Map<String, String> map = new TreeMap<>(); map.put("password", pw); map.put("user", "svc");
      System.out.println(map);
      Properties properties = new Properties(); properties.setProperty("db.password", pw);
      System.out.println(properties);
      System.out.println("login failed for " + new Creds("svc", pw) + "!");
      System.out.println(Optional.of(List.of(new Creds("svc", pw))));
      // commons-lang's ToStringBuilder writes its fields so: no space after the comma
      System.out.println("Creds@1b6d3586[host=db1,password=" + pw + ",user=svc]");
    }
  }
}
"""


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each password's lines, as one run of the program prints them."""
    java = shutil.which("java")
    assert java, "java is needed: the test runs Java's own toString"
    source = tmp_path_factory.mktemp("java") / "Printed.java"
    source.write_text(_PROGRAM)
    lines = subprocess.run([java, str(source), *PASSWORDS], capture_output=True, text=True, check=True,
                           timeout=120).stdout.splitlines(keepends=True)
    return {password: "".join(lines[6 * index:6 * index + 6]) for index, password in enumerate(PASSWORDS)}


@pytest.mark.parametrize("password", PASSWORDS)
def test_a_record_a_map_and_properties(printed: dict[str, str], password: str) -> None:
    assert redacted(printed[password], password).splitlines() == [
        "Creds[username=svc, password=[REDACTED:secret]]", "{password=[REDACTED:secret], user=svc}",
        "{db.password=[REDACTED:secret]}", "login failed for Creds[username=svc, password=[REDACTED:secret]]!",
        "Optional[[Creds[username=svc, password=[REDACTED:secret]]]]",
        "Creds@1b6d3586[host=db1,password=[REDACTED:secret],user=svc]"]

