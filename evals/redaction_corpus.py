"""The labelled redaction corpus: secrets and personal data as their issuers document them, and look-alikes.

Every positive is a spelling that must not survive redaction: a credential in the format its vendor
documents (prefix, alphabet, length), or a secret or personal datum in a context logs really carry it
in (headers, URLs, JSON, Python reprs, command lines, connection strings). The random part of each
credential is drawn from a seeded generator: nothing here is, or ever was, a real credential.
Negatives are text that must come out unchanged: stack frames, hashes, UUIDs, commit shas, versions,
ids and ordinary log lines, many of them close to a secret's shape.
"""

from __future__ import annotations

import base64
import random
import re
import string
from dataclasses import dataclass


@dataclass(frozen=True)
class Positive:
    """A text, the secrets in it that must disappear, and the kind of rule expected to catch them."""

    kind: str
    text: str
    secrets: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Negative:
    """A text that must pass through redaction unchanged."""

    group: str
    text: str


_ALPHABETS = {
    "b62": string.ascii_letters + string.digits,
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "url": string.ascii_letters + string.digits + "-_",
    "b64": string.ascii_letters + string.digits + "+/",
    "dig": string.digits,
    "up": string.ascii_uppercase,
    "updig": string.ascii_uppercase + string.digits,
    "low": string.ascii_lowercase,
    "lowdig": string.ascii_lowercase + string.digits,
    "b32": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
    "ah": "abcdefgh0123456789",
    "crypt": "./" + string.digits + string.ascii_letters,
    "base32": string.ascii_uppercase + "234567",
}
_FIELD = re.compile(r"\{(\w+):(\d+)\}")


def _fill(rng: random.Random, template: str) -> str:
    """`template` with each `{alphabet:n}` replaced by n random characters of that alphabet."""
    return _FIELD.sub(lambda m: "".join(rng.choice(_ALPHABETS[m.group(1)]) for _ in range(int(m.group(2)))),
                      template)


# (kind, template of the credential, where the format is documented). One line per documented spelling.
TOKEN_FORMATS: tuple[tuple[str, str, str], ...] = (
    ("aws_access_key", "AKIA{updig:16}", "AWS IAM User Guide, unique identifier prefixes: access key"),
    ("aws_access_key", "ASIA{updig:16}", "AWS IAM User Guide: temporary (STS) access key"),
    ("aws_access_key", "AROA{updig:16}", "AWS IAM User Guide: role unique id"),
    ("aws_access_key", "AIDA{updig:16}", "AWS IAM User Guide: user unique id"),
    ("aws_access_key", "ANPA{updig:16}", "AWS IAM User Guide: managed policy id"),
    ("aws_access_key", "APKA{updig:16}", "AWS IAM User Guide: public key id"),
    ("github_token", "ghp_{b62:36}", "GitHub Docs, about authentication: personal access token (classic)"),
    ("github_token", "gho_{b62:36}", "GitHub Docs: OAuth access token"),
    ("github_token", "ghu_{b62:36}", "GitHub Docs: user-to-server token"),
    ("github_token", "ghs_{b62:36}", "GitHub Docs: server-to-server token"),
    ("github_token", "ghr_{b62:36}", "GitHub Docs: refresh token"),
    ("github_token", "github_pat_11{updig:20}_{b62:59}", "GitHub Docs: fine-grained personal access token"),
    ("gitlab_token", "glpat-{url:20}", "GitLab Docs, token prefixes: personal/project/group access token"),
    ("gitlab_token", "gldt-{url:20}", "GitLab Docs: deploy token"),
    ("gitlab_token", "glrt-{url:20}", "GitLab Docs: runner authentication token"),
    ("gitlab_token", "glcbt-{hex:2}_{url:20}", "GitLab Docs: CI/CD job token"),
    ("gitlab_token", "glptt-{hex:40}", "GitLab Docs: pipeline trigger token"),
    ("gitlab_token", "glft-{url:20}", "GitLab Docs: feed token"),
    ("gitlab_token", "glimt-{url:25}", "GitLab Docs: incoming mail token"),
    ("gitlab_token", "glagent-{url:50}", "GitLab Docs: agent for Kubernetes token"),
    ("gitlab_token", "gloas-{hex:64}", "GitLab Docs: OAuth application secret"),
    ("gitlab_token", "glsoat-{url:20}", "GitLab Docs: SCIM token"),
    ("gitlab_token", "glffct-{url:20}", "GitLab Docs: feature flags client token"),
    ("gitlab_token", "GR1348941{url:20}", "GitLab Docs: runner registration token"),
    ("slack_token", "xoxb-{dig:12}-{dig:13}-{b62:24}", "Slack API, token types: bot token"),
    ("slack_token", "xoxp-{dig:12}-{dig:12}-{dig:13}-{hex:32}", "Slack API: user token"),
    ("slack_token", "xoxa-2-{dig:12}-{dig:12}-{hex:32}", "Slack API: workspace app token"),
    ("slack_token", "xoxe.xoxp-1-{b62:140}", "Slack API: rotating user token"),
    ("slack_token", "xoxe-1-{b62:140}", "Slack API: refresh token"),
    ("slack_token", "xapp-1-A{updig:10}-{dig:13}-{hex:64}", "Slack API: app-level token"),
    ("slack_token", "https://hooks.slack.com/services/T{updig:8}/B{updig:10}/{b62:24}",
     "Slack API: incoming webhook URL"),
    ("google_api_key", "AIza{url:35}", "Google Cloud Docs: API keys"),
    ("google_oauth", "GOCSPX-{url:28}", "Google Identity: OAuth 2.0 client secret"),
    ("google_oauth", "ya29.a0{url:150}", "Google Identity: OAuth 2.0 access token"),
    ("google_oauth", "1//0{url:60}", "Google Identity: OAuth 2.0 refresh token"),
    ("stripe_key", "sk_live_51{b62:97}", "Stripe Docs, API keys: live secret key"),
    ("stripe_key", "sk_test_51{b62:97}", "Stripe Docs: test secret key"),
    ("stripe_key", "rk_live_51{b62:97}", "Stripe Docs: restricted key"),
    ("stripe_key", "pk_live_51{b62:97}", "Stripe Docs: publishable key"),
    ("stripe_key", "whsec_{b62:32}", "Stripe Docs: webhook signing secret"),
    ("openai_key", "sk-proj-{url:156}", "OpenAI API reference, authentication: project API key"),
    ("openai_key", "sk-svcacct-{url:156}", "OpenAI: service account key"),
    ("openai_key", "sk-admin-{url:156}", "OpenAI: admin key"),
    ("openai_key", "sk-{b62:20}T3BlbkFJ{b62:20}", "OpenAI: legacy user key"),
    ("anthropic_key", "sk-ant-api03-{url:93}AA", "Anthropic API docs: API key"),
    ("anthropic_key", "sk-ant-admin01-{url:93}AA", "Anthropic API docs: admin key"),
    ("npm_token", "npm_{b62:36}", "npm Docs, about access tokens: granular/automation token"),
    ("pypi_token", "pypi-AgEIcHlwaS5vcmc{url:120}", "PyPI help: API tokens (macaroon, the main index)"),
    ("pypi_token", "pypi-AgENdGVzdC5weXBpLm9yZw{url:120}", "PyPI help: API tokens (the test index)"),
    ("sendgrid_key", "SG.{url:22}.{url:43}", "Twilio SendGrid Docs: API keys"),
    ("twilio_key", "SK{hex:32}", "Twilio Docs: API key SID"),
    ("mailgun_key", "key-{hex:32}", "Mailgun Docs: legacy private API key"),
    ("mailgun_key", "{hex:32}-{hex:8}-{hex:8}", "Mailgun Docs: private API key"),
    ("mailchimp_key", "{hex:32}-us{dig:1}", "Mailchimp Marketing API: API key with data center"),
    ("huggingface_token", "hf_{b62:34}", "Hugging Face Docs: user access tokens"),
    ("huggingface_token", "api_org_{b62:34}", "Hugging Face Docs: organization API token"),
    ("digitalocean_token", "dop_v1_{hex:64}", "DigitalOcean Docs: personal access token"),
    ("digitalocean_token", "doo_v1_{hex:64}", "DigitalOcean Docs: OAuth token"),
    ("digitalocean_token", "dor_v1_{hex:64}", "DigitalOcean Docs: refresh token"),
    ("shopify_token", "shpat_{hex:32}", "Shopify Docs: Admin API access token"),
    ("shopify_token", "shpss_{hex:32}", "Shopify Docs: app shared secret"),
    ("shopify_token", "shpca_{hex:32}", "Shopify Docs: custom app access token"),
    ("shopify_token", "shppa_{hex:32}", "Shopify Docs: private app access token"),
    ("atlassian_token", "ATATT3xFfGF0{url:170}={HEX:8}", "Atlassian Support: API tokens"),
    ("atlassian_token", "ATBB{b62:32}", "Bitbucket Cloud: app passwords"),
    ("databricks_token", "dapi{hex:32}", "Databricks Docs: personal access tokens"),
    ("databricks_token", "dapi{hex:32}-2", "Databricks Docs: personal access tokens (Azure)"),
    ("heroku_key", "HRKU-AA{url:58}", "Heroku Dev Center: API keys"),
    ("postman_key", "PMAK-{hex:24}-{hex:34}", "Postman Docs: API keys"),
    ("doppler_token", "dp.pt.{b62:43}", "Doppler Docs: personal token"),
    ("doppler_token", "dp.st.dev.{b62:40}", "Doppler Docs: service token"),
    ("doppler_token", "dp.sa.{b62:43}", "Doppler Docs: service account token"),
    ("doppler_token", "dp.ct.{b62:43}", "Doppler Docs: CLI token"),
    ("linear_key", "lin_api_{b62:40}", "Linear Developers: personal API keys"),
    ("linear_key", "lin_oauth_{b62:40}", "Linear Developers: OAuth token"),
    ("grafana_token", "glc_{b62:100}", "Grafana Cloud Docs: access policy token"),
    ("grafana_token", "glsa_{b62:32}_{hex:8}", "Grafana Docs: service account token"),
    ("vault_token", "hvs.{url:90}", "HashiCorp Vault Docs, tokens: service token"),
    ("vault_token", "hvb.{url:120}", "HashiCorp Vault Docs: batch token"),
    ("vault_token", "hvr.{url:24}", "HashiCorp Vault Docs: recovery token"),
    ("terraform_token", "{b62:14}.atlasv1.{url:67}", "HCP Terraform Docs: API tokens"),
    ("pulumi_token", "pul-{hex:40}", "Pulumi Docs: access tokens"),
    ("sentry_token", "sntrys_eyJ{b64:140}", "Sentry Docs: organization auth token"),
    ("sentry_token", "sntryu_{hex:64}", "Sentry Docs: user auth token"),
    ("newrelic_key", "NRAK-{updig:27}", "New Relic Docs: user key"),
    ("newrelic_key", "NRII-{url:32}", "New Relic Docs: insights insert key"),
    ("discord_token", "MT{b62:22}.{url:6}.{url:38}", "Discord Developer Docs: bot token"),
    ("discord_token", "https://discord.com/api/webhooks/{dig:18}/{url:68}", "Discord Developer Docs: webhook URL"),
    ("teams_webhook", "https://acme.webhook.office.com/webhookb2/{hex:8}-{hex:4}-{hex:4}-{hex:4}-{hex:12}@"
                      "{hex:8}-{hex:4}-{hex:4}-{hex:4}-{hex:12}/IncomingWebhook/{hex:32}/"
                      "{hex:8}-{hex:4}-{hex:4}-{hex:4}-{hex:12}", "Microsoft Learn: Office 365 connector webhook URL"),
    ("onepassword_token", "ops_eyJ{b64:300}", "1Password Developer: service account token"),
    ("render_key", "rnd_{b62:32}", "Render Docs: API keys"),
    ("telegram_token", "{dig:10}:AA{url:33}", "Telegram Bot API: bot token"),
    ("square_token", "sq0atp-{url:22}", "Square Developer: access token"),
    ("square_token", "sq0csp-{url:43}", "Square Developer: OAuth application secret"),
    ("square_token", "EAAA{url:60}", "Square Developer: production access token"),
    ("age_key", "AGE-SECRET-KEY-1{b32:58}", "age specification: secret key (Bech32)"),
    ("dropbox_token", "sl.{url:136}", "Dropbox Developers: short-lived access token"),
    ("figma_token", "figd_{url:40}", "Figma Developers: personal access token"),
    ("notion_token", "secret_{b62:43}", "Notion Developers: internal integration token"),
    ("notion_token", "ntn_{b62:46}", "Notion Developers: integration token"),
    ("airtable_token", "pat{b62:14}.{hex:64}", "Airtable Support: personal access token"),
    ("supabase_token", "sbp_{hex:40}", "Supabase Docs: access token"),
    ("supabase_token", "sb_secret_{url:32}", "Supabase Docs: secret API key"),
    ("docker_token", "dckr_pat_{url:27}", "Docker Docs: personal access token"),
    ("docker_token", "dckr_oat_{url:32}", "Docker Docs: organization access token"),
    ("buildkite_token", "bkua_{hex:40}", "Buildkite Docs: API access token"),
    ("circleci_token", "CCIPAT_{b62:22}_{hex:40}", "CircleCI Docs: personal API token"),
    ("planetscale_token", "pscale_tkn_{url:43}", "PlanetScale Docs: service token"),
    ("planetscale_token", "pscale_pw_{url:43}", "PlanetScale Docs: database password"),
    ("alibaba_key", "LTAI{b62:20}", "Alibaba Cloud: AccessKey ID"),
    ("rubygems_token", "rubygems_{hex:48}", "RubyGems Guides: API keys"),
    ("nuget_key", "oy2{lowdig:43}", "NuGet Docs: API keys"),
    ("replicate_token", "r8_{b62:37}", "Replicate Docs: API tokens"),
    ("groq_key", "gsk_{b62:52}", "GroqCloud Docs: API keys"),
    ("perplexity_key", "pplx-{b62:48}", "Perplexity API Docs: API key"),
    ("xai_key", "xai-{b62:80}", "xAI API Docs: API key"),
    ("tailscale_key", "tskey-auth-k{b62:10}CNTRL-{b62:30}", "Tailscale Docs: auth key"),
    ("tailscale_key", "tskey-api-k{b62:10}CNTRL-{b62:30}", "Tailscale Docs: API access token"),
    ("sourcegraph_token", "sgp_{hex:16}_{hex:40}", "Sourcegraph Docs: access token"),
    ("prefect_key", "pnu_{b62:36}", "Prefect Docs: API key"),
    ("contentful_token", "CFPAT-{url:43}", "Contentful Docs: personal access token"),
    ("typeform_token", "tfp_{b62:44}_{b62:14}", "Typeform Developers: personal access token"),
    ("easypost_key", "EZAK{b62:54}", "EasyPost Docs: production API key"),
    ("easypost_key", "EZTK{b62:54}", "EasyPost Docs: test API key"),
    ("flutterwave_key", "FLWSECK-{ah:32}-X", "Flutterwave Docs: secret key"),
    ("flutterwave_key", "FLWSECK_TEST-{ah:32}-X", "Flutterwave Docs: test secret key"),
    ("shippo_token", "shippo_live_{hex:40}", "Shippo Docs: live API token"),
    ("brevo_key", "xkeysib-{hex:64}-{b62:16}", "Brevo Developers: API key"),
    ("adafruit_key", "aio_{b62:28}", "Adafruit IO: key"),
    ("clojars_token", "CLOJARS_{lowdig:60}", "Clojars: deploy token"),
    ("duffel_token", "duffel_live_{url:43}", "Duffel Docs: access token"),
    ("frameio_token", "fio-u-{url:64}", "Frame.io Developer: token"),
    ("harness_token", "pat.{url:22}.{hex:24}.{b62:20}", "Harness Docs: personal access token"),
    ("infracost_key", "ico-{b62:32}", "Infracost Docs: API key"),
    ("readme_key", "rdme_{lowdig:70}", "ReadMe Docs: API key"),
    ("scalingo_token", "tk-us-{url:48}", "Scalingo Docs: API token"),
    ("netlify_token", "nfp_{b62:40}", "Netlify Docs: personal access token"),
    ("flyio_token", "fo1_{url:43}", "Fly.io Docs: access token"),
    ("flyio_token", "FlyV1 fm2_{b64:200}", "Fly.io Docs: macaroon token"),
    ("mapbox_token", "sk.eyJ1Ijo{b62:30}.{url:22}", "Mapbox Docs: secret access token"),
    ("firebase_key", "AAAA{url:7}:APA91b{url:134}", "Firebase Cloud Messaging: legacy server key"),
    ("octopus_key", "API-{updig:26}", "Octopus Deploy Docs: API key"),
    ("jfrog_token", "AKCp{b62:69}", "JFrog Docs: API key"),
    ("jfrog_token", "cmVmdGtu{b62:56}", "JFrog Docs: reference token"),
    ("cloudflare_key", "v1.0-{hex:24}-{hex:146}", "Cloudflare Docs: Origin CA key"),
    ("azure_client_secret", "{b62:3}8Q~{url:34}", "Microsoft Entra ID Docs: client secret"),
    ("password_hash", "$2b$12${crypt:53}", "crypt(5) (libxcrypt): bcrypt"),
    ("password_hash", "$6${crypt:16}${crypt:86}", "crypt(5): SHA-512-crypt"),
    ("password_hash", "$6$rounds=656000${crypt:16}${crypt:86}", "crypt(5): SHA-512-crypt with its rounds"),
    ("password_hash", "$5${crypt:16}${crypt:43}", "crypt(5): SHA-256-crypt"),
    ("password_hash", "$1${crypt:8}${crypt:22}", "crypt(5): MD5-crypt"),
    ("password_hash", "$apr1${crypt:8}${crypt:22}", "Apache httpd, htpasswd: APR1-MD5"),
    ("password_hash", "$y$j9T${crypt:22}${crypt:43}", "crypt(5): yescrypt"),
    ("password_hash", "$argon2id$v=19$m=65536,t=3,p=4${b64:22}${b64:43}", "PHC string format: Argon2id"),
    ("password_hash", "$pbkdf2-sha256$29000${crypt:22}${crypt:43}", "passlib: pbkdf2_sha256"),
    ("password_hash", "pbkdf2_sha256$600000${b62:22}${b64:43}=", "Django: PBKDF2PasswordHasher"),
    ("password_hash", "argon2$argon2id$v=19$m=102400,t=2,p=8${b64:22}${b64:43}", "Django: Argon2PasswordHasher"),
    ("password_hash", "scrypt$16384${b62:22}$8$1${b64:86}==", "Django: ScryptPasswordHasher"),
    ("password_hash", "scrypt:32768:8:1${b62:16}${hex:128}", "Werkzeug (Flask): generate_password_hash, scrypt"),
    ("password_hash", "pbkdf2:sha256:1000000${b62:16}${hex:64}", "Werkzeug (Flask): generate_password_hash, pbkdf2"),
    ("password_hash", "$P$B{crypt:30}", "phpass (WordPress): portable hash"),
    ("password_hash", "{SSHA}{b64:32}", "OpenLDAP slappasswd: salted SHA-1"),
    ("password_hash", "*{HEX:40}", "MySQL: mysql_native_password"),
    ("password_hash", "$7$CU..../....{crypt:16}${crypt:43}", "crypt(5) (libxcrypt): scrypt"),
)

# Contexts with no secret-named key, so the token's own rule has to find it.
_TOKEN_CONTEXTS = (
    "upstream rejected credential {t}",
    "retrying with cfg_{t} after 401",
    "deploy failed: ['{t}'] invalid (see logs)",
)


def _token_positives(rng: random.Random) -> list[Positive]:
    out: list[Positive] = []
    for kind, template, source in TOKEN_FORMATS:
        for context in _TOKEN_CONTEXTS:
            token = _fill(rng, template)
            out.append(Positive(kind, context.format(t=token), (token,), source))
    return out


def _luhn_complete(prefix_and_body: str) -> str:
    """The number with its Luhn check digit appended."""
    total = 0
    for position, char in enumerate(reversed(prefix_and_body)):
        value = int(char)
        if position % 2 == 0:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return prefix_and_body + str((10 - total % 10) % 10)


def _card(rng: random.Random, prefix: str, length: int) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    return _luhn_complete(body)


def _group(number: str, sizes: tuple[int, ...], separator: str) -> str:
    parts, start = [], 0
    for size in sizes:
        parts.append(number[start : start + size])
        start += size
    return separator.join(parts)


def _iban(rng: random.Random, country: str, bban_template: str) -> str:
    bban = _fill(rng, bban_template)
    rearranged = bban + country + "00"
    number = int("".join(str(int(char, 36)) for char in rearranged))
    return f"{country}{98 - number % 97:02d}{bban}"


def _spaced(iban: str) -> str:
    return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))


def _context_positives(rng: random.Random) -> list[Positive]:
    out: list[Positive] = []

    def add(kind: str, text: str, *secrets: str, source: str) -> None:
        out.append(Positive(kind, text, secrets, source))

    # JWT (RFC 7519), also unsigned and inside headers and cookies.
    for _ in range(4):
        header = rng.choice(["eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ",
                             "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9"])
        jwt = f"{header}.eyJ{_fill(rng, '{url:60}')}.{_fill(rng, '{url:43}')}"
        add("jwt", f"token verification failed for {jwt}", jwt, source="RFC 7519 JSON Web Token")
        add("jwt", f"jwt={jwt}; Path=/", jwt, source="RFC 7519 in a cookie")
    unsigned = f"eyJhbGciOiJub25lIn0.eyJ{_fill(rng, '{url:40}')}."
    add("jwt", f"rejected unsigned token {unsigned}", unsigned, source="RFC 7519 unsecured JWT")
    # PEM private keys (RFC 7468), raw, with escaped newlines (JSON in a log line), and a GCP key file.
    body = "\n".join(_fill(rng, "{b64:64}") for _ in range(4))
    for label in ("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY",
                  "ENCRYPTED PRIVATE KEY", "PGP PRIVATE KEY BLOCK", "DSA PRIVATE KEY"):
        pem = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
        add("private_key", f"loaded key:\n{pem}\nfrom vault", body.split("\n")[1], source="RFC 7468 PEM")
        escaped = pem.replace("\n", "\\n")
        add("private_key", f'{{"key": "{escaped}"}}', body.split("\n")[2], source="RFC 7468 PEM, JSON-escaped")
    key_id = _fill(rng, "{hex:40}")
    gcp = (f'{{"type": "service_account", "project_id": "shop-prod", "private_key_id": "{key_id}", '
           f'"private_key": "-----BEGIN PRIVATE KEY-----\\n{_fill(rng, "{b64:64}")}\\n-----END PRIVATE KEY-----\\n"}}')
    add("private_key", gcp, key_id, source="Google Cloud: service account key file")
    ssh2 = "\n".join(_fill(rng, "{b64:64}") for _ in range(3))
    add("private_key", f'---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "rsa-key"\n{ssh2}\n'
                       "---- END SSH2 ENCRYPTED PRIVATE KEY ----", ssh2.split("\n")[1], source="RFC 4716 SSH2 key")
    putty = _fill(rng, "{b64:64}")
    add("private_key", f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ed\nPublic-Lines: 1\n"
                       f"AAAAC3NzaC1lZDI1NTE5AAAAI\nPrivate-Lines: 1\n{putty}\nPrivate-MAC: {_fill(rng, '{hex:64}')}",
        putty, source="PuTTY user key file (PPK v3)")
    truncated = f"-----BEGIN RSA PRIVATE KEY-----\n{_fill(rng, '{b64:64}')}"
    add("private_key", f"config dump: {truncated}", truncated[-40:], source="RFC 7468 PEM, cut off")

    # Authorization headers (RFC 9110 and each scheme's spec), any case.
    basic = _fill(rng, "{b64:28}") + "=="
    bearer = _fill(rng, "{url:40}")
    for header in (f"Authorization: Basic {basic}", f"authorization: basic {basic}", f"AUTHORIZATION: BASIC {basic}",
                   f"Proxy-Authorization: Basic {basic}", f'-H "Authorization: Basic {basic}"',
                   f"X-Forwarded-Authorization: Basic {basic}", f"X-Authorization: Basic {basic}"):
        add("bearer", f"request headers: {header}", basic, source="RFC 7617 Basic")
    for header in (f"Authorization: Bearer {bearer}", f"Authorization: BEARER {bearer}", f"bearer {bearer}",
                   f"BEARER {bearer}", f'{{"Authorization": "Bearer {bearer}"}}',
                   f"'authorization': 'Bearer {bearer}'"):
        add("bearer", f"upstream call with {header} failed", bearer, source="RFC 6750 Bearer")
    drf = _fill(rng, "{hex:40}")
    add("bearer", f"Authorization: Token {drf}", drf, source="Django REST framework TokenAuthentication")
    add("bearer", f"Authorization: token {drf}", drf, source="GitHub REST API: token scheme")
    okta = "00" + _fill(rng, "{url:40}")
    add("bearer", f"Authorization: SSWS {okta}", okta, source="Okta API tokens")
    dd = _fill(rng, "{hex:64}")
    add("bearer", f"Authorization: AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20240101/us-east-1/s3/aws4_request, "
                  f"SignedHeaders=host;x-amz-date, Signature={dd}", dd, source="AWS Signature Version 4 header")
    digest = _fill(rng, "{hex:32}")
    add("bearer", f'Authorization: Digest username="bob", realm="api", nonce="x", response="{digest}"', digest,
        source="RFC 7616 Digest")
    ak = _fill(rng, "{b62:40}")
    add("bearer", f"Authorization: ApiKey {ak}", ak, source="Elasticsearch API key scheme")

    # Cookies (RFC 6265).
    sid, csrf = _fill(rng, "{b62:32}"), _fill(rng, "{b62:32}")
    add("cookie", f"Cookie: sessionid={sid}; csrftoken={csrf}", sid, csrf, source="RFC 6265 Cookie")
    add("cookie", f"cookie: JSESSIONID={sid.upper()}", sid.upper(), source="RFC 6265 Cookie (Servlet)")
    add("cookie", f"Set-Cookie: session={sid}; Path=/; HttpOnly; Secure; SameSite=Lax", sid,
        source="RFC 6265 Set-Cookie")
    add("cookie", f'{{"headers": {{"cookie": "_ga=GA1.2.3; auth_session={sid}"}}}}', sid, source="Cookie in JSON")
    add("cookie", f"set-cookie: remember_token={csrf}; Expires=Wed, 21 Oct 2026 07:28:00 GMT", csrf,
        source="RFC 6265 Set-Cookie with Expires")

    # URL credentials (RFC 3986 userinfo), passwords with any characters.
    for url, secret in (
        ("redis://:{p}@cache-0.svc:6379/0", "{p}"),
        ("postgres://app:{p}@db.internal:5432/shop", "{p}"),
        ("mysql://root:{p}@ss/w0rd@mysql:3306/x", "{p}@ss/w0rd"),
        ("amqp://guest:{p}/x@rabbit:5672/", "{p}/x"),
        ("mongodb+srv://svc:{p}@cluster0.abcde.mongodb.net/db", "{p}"),
        ("https://x-access-token:{p}@github.com/acme/shop.git", "{p}"),
        ("ftp://anon:{p}:x@files.example.org/pub", "{p}:x"),
        ("smtp://mailer:p%40{p}@smtp.example.com:587", "p%40{p}"),
    ):
        password = _fill(rng, "{b62:14}")
        add("url_password", f"connect {url.format(p=password)} failed", secret.format(p=password),
            source="RFC 3986 userinfo")

    # Query strings and presigned URLs.
    sig = _fill(rng, "{hex:64}")
    add("secret", f"GET https://bucket.s3.amazonaws.com/a.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA"
                  f"{_fill(rng, '{updig:16}')}%2F20240101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20240101T000000Z"
                  f"&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={sig}", sig,
        source="AWS S3 presigned URL (SigV4 query)")
    tok = _fill(rng, "{b64:120}")
    add("secret", f"GET /a.pdf?X-Amz-Security-Token={tok}&X-Amz-Signature={sig}", tok, sig,
        source="AWS SigV4 query with session token")
    gsig = _fill(rng, "{hex:256}")
    add("secret", f"https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=svc%40p.iam"
                  f"&X-Goog-Signature={gsig}", gsig, source="Google Cloud Storage signed URL")
    sas = _fill(rng, "{b64:43}") + "%3D"
    add("secret", f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-01-01&sig={sas}", sas,
        source="Azure Storage shared access signature")
    cf = _fill(rng, "{url:172}")
    add("secret", f"https://d111.cloudfront.net/i.png?Expires=1700000000&Signature={cf}&Key-Pair-Id=K2JCJMDEHXQW5F",
        cf, source="Amazon CloudFront signed URL")
    for name in ("access_token", "api_key", "apikey", "token", "client_secret", "password", "refresh_token",
                 "id_token", "auth_token", "secret"):
        value = _fill(rng, "{url:32}")
        add("secret", f"GET /v1/orders?page=2&{name}={value}&sort=asc 401", value, source=f"query parameter {name}")

    # key=value, JSON, Python dicts and reprs, YAML, env files, command lines.
    for spelling in ("password={v}", "PASSWORD={v}", "db_password={v}", "dbPassword={v}", "DB_PASS={v}",
                     "pass={v}", "pw={v}", "pwd={v}", "passwd={v}", "secret={v}", "client_secret={v}",
                     "api_key={v}", "API-KEY={v}", "apiKey={v}", "x-api-key: {v}", "X-API-Key: {v}",
                     "access_token: {v}", "private_key={v}", "auth_token={v}", "credentials={v}",
                     "secret_key: {v}", "SECRET_KEY = {v}", "password => {v}", "password := {v}",
                     "Password:{v}", "userPassword={v}", "encryption_key={v}", "signing_key={v}",
                     "PRIVATE-TOKEN: {v}", "Ocp-Apim-Subscription-Key: {v}", "X-Vault-Token: {v}",
                     "DD_API_KEY={v}", "pin={v}", "otp={v}", "passcode={v}", "-Dpassword={v}",
                     # a secret name with a suffix (Rails `password_confirmation`, `secret_key_base`)
                     "password_confirmation={v}", "passwordConfirm={v}", "password2={v}", "PASSWORD_1={v}",
                     "passwd_old={v}", "secret_value={v}", "token_value={v}", "secret_key_base={v}",
                     # a plural name
                     "passwords={v}", "DB_PASSWORDS={v}", "api_keys={v}", "apiKeys: {v}", "secret_keys={v}"):
        value = _fill(rng, "{b62:6}") + rng.choice("!#$%*") + _fill(rng, "{b62:6}")
        add("secret", f"config: {spelling.format(v=value)} loaded", value, source=f"key/value spelling {spelling}")
    for spelling, value in (
        ('{{"password": "{v}", "user": "bob"}}', "hunter {w}"),
        ("{{'password': '{v}', 'user': 'bob'}}", "two words {w}"),
        ('password="{v}" user=bob', "correct horse {w}"),
        ("password='{v}'", "with space {w}"),
        ('{{\\"password\\": \\"{v}\\"}}', "escaped {w}"),
        ('{{"client_secret":"{v}"}}', "{w}"),
        ("User{{name=bob, password={v}}}", "{w}"),
        ("Credentials[username=bob, password={v}]", "{w}"),
        ("{{Password:{v} User:bob}}", "{w}"),
        ("<password>{v}</password>", "{w}"),
        ("<ns:secret>{v}</ns:secret>", "{w}"),
        ("passphrase: {v}", "open {w}"),
        ('passphrase = "{v}"', "open {w}"),
        ("  password: {v}", "{w}"),
        ("export AWS_SECRET_ACCESS_KEY={v}", "{w40}"),
        ('"SecretAccessKey": "{v}"', "{w40}"),
        ('"SessionToken": "{v}"', "{w}"),
        ("--password {v}", "{w}"),
        ("--password={v}", "{w}"),
        ("--db-password '{v}'", "two words {w}"),
        ("--token {v}", "{w}"),
        ("--api-key={v}", "{w}"),
        ("curl -u admin:{v} https://api", "{w}"),
        ("curl --user admin:{v} https://api", "{w}"),
        ("mysql --password={v} -h db", "{w}"),
        # values a rule once hid only in part: Python prefixes, brackets, backticks, words after `:`
        ("password=b'{v}'", "{w}"), ("password=u'{v}'", "{w}"), ("password=({v})", "{w}"),
        ("password=[{v}]", "{w}"), ("password=<{v}>", "{w}"), ("password=`{v}`", "{w}"),
        ("password={v}[prod]", "{w}"), ("token={v}(expired)", "{w}"),
        ('{{"password": {{"v": "{v}"}}}}', "{w}"), ('{{"secret": ["{v}"]}}', "{w}"),
    ):
        filled = value.format(w=_fill(rng, "{b62:12}"), w40=_fill(rng, "{b64:40}"))
        add("secret", f"startup: {spelling.format(v=filled)}", filled, source=f"secret in {spelling}")
    tail = _fill(rng, "{b62:12}")
    add("secret", f'startup: password="ab\\"cd-{tail}" user=bob', tail, source="secret with an escaped quote")
    words = _fill(rng, "{b62:12}")
    add("secret", f"startup: db_password: correct horse {words}", words, source="words after a secret key and `:`")
    # A capitalised word before a bracket is a password, not a type's repr (`password=Hunter[prod]`), also when
    # it names a secret (`Password[prod]`): only a secret holder's repr (`SecretStr('***')`) is not.
    for spelling, value in (
        ("password={v}[prod]", "Hunter"), ("password={v}[prod]", "{c}"), ("password={v}(prod)", "{c}"),
        ("password={v}{{prod}}", "{c}"), ("pwd={v}[prod env]", "{c}"), ("secret={v}(2024)", "{c}"),
        ("token={v}[eu-west-1]", "{c}"), ("password={v}[prod]", "Password{c}"), ("passwd: {v}()", "{c}"),
    ):
        filled = value.format(c=_fill(rng, "{up:1}{low:8}"))
        add("secret", f"startup: {spelling.format(v=filled)}", filled, source=f"capitalised secret in {spelling}")
    # A key on one line, its value on the next (YAML dumps, pretty-printed JSON, wrapped messages).
    for split in ("password:\n  {v}", "password\n  : {v}", '"api_key":\n    "{v}"', "token =\n{v}"):
        value = _fill(rng, "{b62:14}")
        add("secret", f"config dump\n{split.format(v=value)}\n\tat com.acme.Config.load(Config.java:12)", value,
            source="secret split across lines")
    # High-entropy values under names that are secret only when the value is random.
    for name in ("key", "auth", "session", "sid", "hmac", "salt", "code", "nonce"):
        value = _fill(rng, "{b62:32}")
        add("secret", f'{{"{name}": "{value}", "op": "charge"}}', value, source=f"high-entropy value under {name}")
    # Cloud connection strings.
    account_key = _fill(rng, "{b64:86}") + "=="
    add("azure_key", f"DefaultEndpointsProtocol=https;AccountName=shop;AccountKey={account_key};"
                     f"EndpointSuffix=core.windows.net", account_key, source="Azure Storage connection string")
    sak = _fill(rng, "{b64:43}") + "="
    add("azure_key", f"Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={sak}",
        sak, source="Azure Service Bus connection string")
    aws_secret = _fill(rng, "{b64:40}")
    add("aws_secret_key", f"aws_secret_access_key = {aws_secret}", aws_secret, source="AWS CLI credentials file")
    add("aws_secret_key", f"AWS_SECRET_ACCESS_KEY: '{aws_secret}'", aws_secret, source="AWS env in YAML")

    # Personal data: cards (ISO/IEC 7812, Luhn), IBANs (ISO 13616), emails (RFC 5322, RFC 6531), phones (E.164).
    for network, prefix, length, groups in (
        ("Visa", "4", 16, (4, 4, 4, 4)), ("Mastercard", "51", 16, (4, 4, 4, 4)), ("Mastercard 2-series", "2221", 16,
        (4, 4, 4, 4)), ("Amex", "37", 15, (4, 6, 5)), ("Discover", "6011", 16, (4, 4, 4, 4)),
        ("JCB", "3528", 16, (4, 4, 4, 4)), ("Diners", "36", 14, (4, 6, 4)), ("UnionPay", "62", 16, (4, 4, 4, 4)),
        ("Visa 13", "4", 13, (4, 4, 5)),
    ):
        number = _card(rng, prefix, length)
        for separator in ("", " ", "-", "."):
            text = _group(number, groups, separator)
            add("credit_card", f"charge declined for card {text} (retry 2)", text, source=f"ISO/IEC 7812 {network}")
        add("credit_card", f"card_{number} rejected", number, source=f"ISO/IEC 7812 {network} after _")
    number = _card(rng, "4", 16)
    for text in (f"{number[:4]} {number[4:8]}-{number[8:12]} {number[12:]}", _group(number, (4, 4, 4, 4), "  "),
                 _group(number, (4, 4, 4, 4), "/"), _group(number, (4, 8, 4), " ")):
        add("credit_card", f"charge declined for card {text}", text, source="ISO/IEC 7812 Visa, mixed separators")
    # Encoded as a logged URL, form body or JSON string carries it (RFC 3986 percent-encoding, the HTML form
    # encoding's `+` for a space, JSON's \u escapes and \n, Python's repr), run into a field name, and as a
    # magnetic stripe's track 2 (ISO/IEC 7813: the number, `D`, expiry, service code) or F-padded, after an
    # EMV tag and length (EMVCo Book 3: 5A, the PAN), and as a float prints it.
    number = _card(rng, "55", 16)
    spaced = _group(number, (4, 4, 4, 4), " ")
    for template, text in (("POST /pay card_number={}&exp=12%2F27", spaced.replace(" ", "+")),
                           ("GET /pay?card={}&cvc=123", spaced.replace(" ", "%20")),
                           ("GET /search?q=%22{}%22", number), ("GET /pay?pan%3D{} 400", number),
                           ('{{"body": "{{\\"pan\\": \\"{}\\"}}"}}', number), ("body: pan:\\u0020{}", number),
                           ("rejected:\\n{}\\n", number), ("CardNumber{} declined", number),
                           ("GET /pay?card={}", spaced.replace(" ", "%2B")), ("row\t{}\tok", spaced.replace(" ", "\t")),
                           ("invalid literal for int(): '{}'", spaced.replace(" ", "\\xa0")),
                           ('{{"pan": "{}"}}', spaced.replace(" ", "\\u202f")),
                           ("card {} declined", spaced.replace(" ", "\u2013")),
                           ("?card={}", spaced.replace(" ", "%C2%A0")), ("ICC tag 57={}D25122011143804400000F", number),
                           ("pan={}FFFFFFFF", number), ("track2=B{}D25122010000000000000F0", number),
                           ("ICC: 570E{}D25122011234", number), ("EMV 5A08{} 5F2A 02 0978", number),
                           ("?q=card%C2%A0{}", number), ("pan={}.0 (float64)", number)):
        add("credit_card", template.format(text), text, source="ISO/IEC 7812 Mastercard, encoded")
    for country, bban in (("DE", "{dig:18}"), ("GB", "{up:4}{dig:14}"), ("FR", "{dig:23}"), ("NL", "{up:4}{dig:10}"),
                          ("ES", "{dig:20}"), ("IT", "{up:1}{dig:22}"), ("CH", "{dig:17}"), ("BE", "{dig:12}")):
        iban = _iban(rng, country, bban)
        add("iban", f"payout to {iban} failed", iban, source=f"ISO 13616 IBAN {country}")
        add("iban", f"payout to {_spaced(iban)} failed", _spaced(iban), source=f"ISO 13616 IBAN {country}, print form")
    for local, domain in (("bob.smith+orders", "example.co.uk"), ("jane_doe", "mail.example.com"),
                          ("x", "example.io"), ("müller", "beispiel.de"), ("josé", "exämple.es"),
                          ("用户", "例子.广告"), ("pelé", "xn--bcher-kva.example"), ("o'brien", "example.ie"),
                          ("ops-alerts", "acme-corp.travel")):
        email = f"{local}@{domain}"
        add("email", f"notification to {email} bounced", email, source="RFC 5322 / RFC 6531 address")
    for email in ("jane%40example.com", '"jane.doe"@example.com', "jane\uff20example.com"):
        add("email", f"GET /users?mail={email} 404", email,
            source="RFC 3986 percent-encoded, RFC 5322 quoted local part, full-width @")
    for phone in ("+1 415 555 0132", "+44 20 7946 0958", "+33 1 09 75 83 51", "+49 30 901820", "+81-3-1234-5678",
                  "+1 (212) 555-0147", "+61 2 9876 5432", "(415) 555-2671", "415-555-2671", "415.555.2671",
                  "+4915112345678", "+91 98765 43210"):
        add("phone", f"SMS to {phone} failed: carrier timeout", phone, source="ITU-T E.164 / NANP")
    for ip in ("203.0.113.45", "198.51.100.7", "2001:db8:85a3::8a2e:370:7334", "fe80::1ff:fe23:4567:890a"):
        add("ipv4" if "." in ip else "ipv6", f"client {ip} refused", ip, source="RFC 5737 / RFC 3849 documentation")
    for host, address in (("adsl-{}.dsl.example.net", "203-0-113-45"), ("dsl-{}.example-ip.net", "192-000-002-017"),
                          ("ec2-{}.compute-1.amazonaws.com", "198-51-100-7"), ("{}.rev.example.fr", "198-51-100-250")):
        add("ipv4", f"authentication failure; rhost={host.format(address)}", address,
            source="RFC 5737 address in an ISP's or a cloud's host name (as loghub's sshd logs show them)")
    for host, address in (("dsl-static-{}.example-ip.net", "192.000.002.017"), ("host{}.example.com", "198.51.100.21"),
                          ("static.{}.clients.example.de", "203.0.113.45")):
        add("ipv4", f"connection from ({host.format(address)}) at Sun Jul  3", address,
            source="RFC 5737 address dotted in a host name (as loghub's ftpd logs show them)")
    for _ in range(3):
        area = rng.choice([n for n in range(1, 900) if n != 666])
        ssn = f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"
        add("ssn", f"identity check failed for applicant {ssn}", ssn, source="SSA: Social Security number format")
    for _ in range(3):
        group = rng.choice([*range(50, 66), *range(70, 89), 90, 91, 92, *range(94, 100)])
        itin = f"9{rng.randint(0, 99):02d}-{group}-{rng.randint(0, 9999):04d}"
        add("itin", f"W-7 check failed for taxpayer {itin}", itin, source="IRS: ITIN format (9xx, issued groups)")
    for kind, text, number in (("ssn", "KYC rejected: SSN: 078 05 1120", "078 05 1120"),
                               ("ssn", "social security number 219 09 9999 mismatch", "219 09 9999"),
                               ("itin", "W-7 pending for ITIN 912 70 1234", "912 70 1234")):
        add(kind, text, number, source="SSA / IRS number written with spaces after its name")
    # Console logs coloured for a terminal (ECMA-48 SGR), and a line cut short inside a quoted value.
    coloured = _fill(rng, "{b62:14}")
    add("secret", f"\x1b[1mpassword\x1b[0m=\x1b[31m{coloured}\x1b[0m rejected", coloured,
        source="ECMA-48 colours around a key and its value")
    cut = _fill(rng, "{b62:14}")
    add("secret", f'login failed: password="{cut}', cut, source="a log line cut inside a quoted value")
    # URL-encoded, as a query string or form body carries them (RFC 3986 percent-encoding).
    github = "ghp_" + _fill(rng, "{b62:36}")
    add("github_token", f"GET /cb?next=%2Fhome%3Ftoken%3D{github} 302", github, source="RFC 3986 percent-encoded query")
    aws = "AKIA" + _fill(rng, "{updig:16}")
    add("aws_access_key", f"POST /hook body=k%3D{aws}%26region%3Deu", aws, source="form body, percent-encoded")
    encoded = _fill(rng, "{b62:14}")
    add("url_password", f"proxy=https%3A%2F%2Fsvc%3A{encoded}%40proxy.internal%3A3128 refused", encoded,
        source="a URL passed as an encoded parameter")
    # A password named in words; `user:password@host:port` as database and cache drivers log it.
    said = _fill(rng, "{b62:12}")
    add("secret", f"LDAP bind failed for uid=svc: password '{said}' rejected", said, source="a password named in words")
    prose = "q" + _fill(rng, "{b62:9}") + "7"
    add("secret", f"welcome mail sent to bob: your temporary password is {prose} (expires in 24h)", prose,
        source="a password named in prose, unquoted")
    first, second = _fill(rng, "{b62:16}"), _fill(rng, "{b62:16}")
    add("secret", f"loaded API_KEYS={first},{second} from the environment", first, second,
        source="a plural name's list")
    dsn = _fill(rng, "{b62:12}")
    add("url_password", f"connecting to admin:{dsn}@10.20.30.40:5432 timed out", dsn,
        source="user:password@host:port without a scheme")
    # JSON whose writer escapes `=` and `&` (Gson's default HTML-safe escaping), HTML character references,
    # a form's `+` for a space, a line cut inside an escape, a password holding `@`.
    gson = "ghp_" + _fill(rng, "{b62:36}")
    add("github_token", f'{{"url":"https://shop.example/cb?access_token\\u003d{gson}\\u0026state\\u003d1"}}', gson,
        source="Gson's HTML-safe escapes in a logged JSON string")
    entity = _fill(rng, "{b62:12}")
    add("secret", f"form={{&quot;password&quot;:&quot;{entity}&quot;}}", entity, source="HTML character references")
    plus = _fill(rng, "{b62:12}")
    add("secret", f"body=login+failed+password+%27{plus}%27", plus, source="an HTML form body, `+` for a space")
    cut_github = "ghp_" + _fill(rng, "{b62:36}")
    add("github_token", f"next=%2Fcb%3Ftoken%3D{cut_github}%26utm%3Dmail%2", cut_github,
        source="a percent-encoded line cut inside an escape")
    at = _fill(rng, "{b62:6}") + "@" + _fill(rng, "{b62:6}")
    add("url_password", f"redis=default:{at}@cache-0:6379 refused", at,
        source="a driver's address, `@` in the password")
    b64 = _fill(rng, "{b62:6}") + "/" + _fill(rng, "{b62:6}") + "+" + _fill(rng, "{b62:4}") + "="
    add("url_password", f"pool: admin:{b64}@[2001:db8::5]:5432 exhausted", b64,
        source="base64 password, IPv6 host in brackets")
    gson_plus = _fill(rng, "{b62:8}") + "+" + _fill(rng, "{b62:8}")
    add("secret", f'{{"cfg":"api_key\\u003d{gson_plus}","path":"/a%20b"}}', gson_plus,
        source="Gson's `=` escape, a `+` in the value, a percent escape elsewhere")
    oracle = _fill(rng, "{b62:10}")
    add("url_password", f"jdbc:oracle:thin:app_user/{oracle}@//db.corp.example.com:1521/ORCLPDB1 refused", oracle,
        source="Oracle's thin-driver URL, user/password@")
    go_dsn = _fill(rng, "{b62:10}")
    add("url_password", f"[mysql] dsn: app:{go_dsn}@tcp(db.internal:3306)/shop", go_dsn,
        source="Go's MySQL driver DSN")
    env = _fill(rng, "{b62:12}")
    add("secret", f'{{"name":"DB_PASSWORD","value":"{env}"}}', env, source="a Kubernetes env entry")
    layered = _fill(rng, "{b62:5}") + "&" + _fill(rng, "{b62:6}")
    add("secret", f"next=%2Fcb%3Fpassword%3D{layered.replace('&', '%2526')}%26x%3D1", layered.split("&")[1],
        source="a password holding `&`, its query encoded twice")
    # Where a secret stands by other clients' conventions.
    column = _fill(rng, "{b62:16}")
    add("secret", f"ERROR: duplicate key value violates unique constraint \"users_api_token_key\"\n"
                  f"DETAIL: Key (tenant_id, api_token)=(7, {column}) already exists.", column,
        source="PostgreSQL's unique-violation detail (errdetail of _bt_check_unique)")
    for language, detail in (("German", "Schlüssel »(tenant_id, api_token)=(7, {v})« existiert bereits."),
                             ("French", "La clé « (tenant_id, api_token)=(7, {v}) » existe déjà."),
                             ("Japanese", "キー (tenant_id, api_token)=(7, {v}) はすでに存在します。"),
                             ("Chinese", '键值"(tenant_id, api_token)=(7, {v})" 已经存在'),
                             ("Korean", "(tenant_id, api_token)=(7, {v}) 키가 이미 있습니다."),
                             ("English, a partition key",
                              "Partition key of the failing row contains (tenant_id, api_token)=(7, {v})."),
                             ("Chinese, conflicting keys",
                              "键(tenant_id, api_token)=(7, {v})与已存在的键(tenant_id, api_token)=(8, {v})冲突"),
                             ("Swedish, a duplicated key", "Nyckeln (tenant_id, api_token)=(7, {v}) är duplicerad.")):
        column = _fill(rng, "{b62:16}")
        add("secret", f"DETAIL:  {detail.format(v=column)}", column,
            source=f"PostgreSQL's key detail as its catalogue prints it: {language} (postgres-15.mo)")
    for statement, source in (
            ("INSERT INTO users (email, password_hash, api_key) VALUES (?, ?, ?)]\n[parameters: (7, '{h}', '{v}')",
             "SQLAlchemy's IntegrityError: an INSERT's positional parameters (sqlite3)"),
            ("UPDATE accounts SET api_token=%s, updated_at=now() WHERE accounts.id = %s]\n[parameters: ('{v}', 42)",
             "SQLAlchemy's DataError: an UPDATE's parameters (psycopg2)"),
            ("SELECT users.id FROM users WHERE users.name = $1 AND users.password = crypt($2, users.password)]\n"
             "[parameters: ('bob', '{v}')", "SQLAlchemy's DBAPIError: a parameter bound inside a call (asyncpg)")):
        value, hashed = _fill(rng, "{b62:14}"), _fill(rng, "{hex:40}")
        add("secret", f"sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) constraint failed\n"
                      f"[SQL: {statement.format(v=value, h=hashed)}]\n(Background on this error at: "
                      f"https://sqlalche.me/e/20/gkpj)", value, source=source)
    for detail, source in (("Failing row contains (41, {v}, null, 2024-06-01 10:00:00+00).", "English"),
                           ("Fehlgeschlagene Zeile enthält (41, {v}, null).", "German"),
                           ("失敗した行は(41, {v}, null)を含みます", "Japanese")):
        row_value = _fill(rng, "{b62:14}")
        add("secret", f"ERROR:  null value in column \"email\" of relation \"users\" violates not-null constraint\n"
                      f"DETAIL:  {detail.format(v=row_value)}", row_value,
            source=f"PostgreSQL's failing row, every column unnamed: {source} (postgres-15.mo)")
    unlisted = _fill(rng, "{b62:14}")
    statement = "[SQL: INSERT INTO users VALUES (?, ?, ?)]"
    add("secret", f"sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) UNIQUE constraint failed: users.name\n"
                  f"{statement}\n[parameters: ('bob', '{unlisted}', 7)]", unlisted,
        source="SQLAlchemy's IntegrityError: an INSERT without a column list")
    for spelling, source in (('{{"пароль": "{v}"}}', "a JSON key in Russian"), ("Passwort={v}", "a key in German"),
                             ("contraseña: {v}", "a key in Spanish"), ("mfa_seed={v}", "a second factor's TOTP seed"),
                             ("totp={v}", "a TOTP seed under its short name"), ("ПАРОЛЬ: {v}", "a key in capitals"),
                             ("otp_backup_codes: {v}", "GitLab's second-factor recovery codes")):
        named = _fill(rng, "{base32:16}")
        add("secret", f"login failed: {spelling.format(v=named)}", named, source=f"a password's name: {source}")
    argument = _fill(rng, "{b62:14}")
    add("secret", f"--- Logging error ---\nMessage: 'login failed for %s'\nArguments: ('bob', '{argument}')", argument,
        source="Python logging's error for a call whose format string does not take its arguments")
    argument = _fill(rng, "{b62:14}")
    add("secret", f"Jan 01 12:00:00 web1 gunicorn[812]: Arguments: ('bob', '{argument}')", argument,
        source="Python logging's error Arguments through syslog")
    doubled = _fill(rng, "{crypt:53}")
    add("password_hash", f'      - "traefik.http.middlewares.auth.basicauth.users=admin:$$2y$$05$${doubled}"', doubled,
        source="a bcrypt hash with each $ doubled, as docker-compose wants it (Traefik's docs)")
    for spelling, source in (("redis-cli -h cache -a {v} ping", "redis-cli's -a"),
                             ("sshpass -p {v} ssh deploy@bastion", "sshpass's -p"),
                             ("docker login -u ci -p {v} registry.example.com", "docker login's -p"),
                             ('    r = requests.get(url, auth=("svc", "{v}"))', "requests' auth tuple in a traceback"),
                             ("aiohttp.BasicAuth('svc', '{v}')", "aiohttp's BasicAuth"),
                             ("Command '['docker', 'login', '-u', 'ci', '-p', '{v}']' returned non-zero exit status 1.",
                              "subprocess.CalledProcessError's argument list"),
                             ("keytool -importkeystore -srcstorepass {v} -deststorepass {v}",
                              "keytool's store passwords"),
                             ('<entry key="db.password">{v}</entry>', "java.util.Properties.storeToXML"),
                             ("define('DB_PASSWORD', '{v}');", "PHP's define in wp-config.php"),
                             ("SET PASSWORD FOR 'app'@'%' = PASSWORD('{v}')", "MySQL's PASSWORD() function"),
                             ("htpasswd -b /etc/nginx/.htpasswd svc {v}", "htpasswd's -b"),
                             ("echo {v} | docker login -u ci --password-stdin ghcr.io",
                              "docker login --password-stdin")):
        flag = _fill(rng, "{b62:12}")
        add("secret", f"exec failed: {spelling.format(v=flag)}", flag, source=source)
    for spelling, source in (
            ("Command '['mysql', '-h', 'db', '-u', 'app', '-p{v}', '-e', 'select 1']' returned non-zero exit status 1.",
             "subprocess.CalledProcessError of mysql, its password glued to -p"),
            ("Command '['ldapsearch', '-x', '-D', 'cn=admin,dc=x', '-w', '{v}', '-b', 'dc=x']' returned non-zero "
             "exit status 49.", "subprocess.CalledProcessError of ldapsearch -w"),
            ("Command '['curl', '-sf', '-u', 'admin:{v}', 'https://api.internal/v1']' returned non-zero exit "
             "status 22.",
             "subprocess.CalledProcessError of curl -u user:password"),
            ("+ ldapsearch -x -H ldap://dir -D cn=admin,dc=x -w {v} -b dc=x", "bash -x of ldapsearch -w"),
            ("+ zip -q -P {v} backup.zip dump.sql", "bash -x of zip -P"),
            ("+ openssl enc -aes-256-cbc -pbkdf2 -k {v} -in dump.sql", "bash -x of openssl enc -k"),
            ("+ openssl pkcs12 -export -in c.pem -passout pass:{v} -out c.p12", "bash -x of openssl -passout pass:"),
            ("sqlcmd -S db -U sa -P {v} -Q \"select 1\"", "Go's exec.Cmd String() of sqlcmd -P"),
            ("+ mongosh --host db -u admin -p {v} --eval 'db.stats()'", "bash -x of mongosh -p"),
            ("+ az login --service-principal -u 0b1c -p {v} --tenant t1", "bash -x of az login -p"),
            ("+ smbclient //fs01/share -U admin%{v} -c ls", "bash -x of smbclient -U user%password"),
            ("+ ipmitool -I lanplus -H bmc1 -U admin -P {v} chassis status", "bash -x of ipmitool -P"),
            ("+ 7z a -p{v} backup.7z dump.sql", "bash -x of 7z -p"),
            ("pymysql.err.IntegrityError: (1062, \"Duplicate entry '{v}' for key 'users.token_UNIQUE'\")",
             "MariaDB's duplicate key error through pymysql"),
            ("INSERT INTO users (email, password) VALUES ('jane@example.com', '{v}')", "MariaDB's general log"),
            ("DB_PASSWORD_PROD={v}", "an environment's secret with its stage's suffix (env)"),
            ("environ({{'STRIPE_SECRET_LIVE': '{v}'}})", "os.environ's repr, a suffixed name"),
            ("DataSourceProps[url=jdbc:x, passwordProd={v}]", "a Java record's toString, a suffixed name"),
            ("[(b'host', b'api'), (b'x-api-key', b'{v}')]", "an ASGI scope's raw headers (Starlette)"),
            ("Cookie(version=0, name='session', value='{v}', port=None)", "http.cookiejar's Cookie repr"),
            ('http.Cookie{{Name:"session", Value:"{v}", Path:"/"}}', "Go's %#v of an http.Cookie"),
            ("ALTER LOGIN sa WITH PASSWORD=N'{v}'", "SQL Server's ALTER LOGIN with a Unicode literal"),
            ("ALTER USER app WITH PASSWORD E'{v}'", "PostgreSQL's escape string literal"),
            ("CREATE USER 'app'@'%' IDENTIFIED WITH mysql_native_password BY '{v}'", "MySQL's auth plugin clause"),
            ("dsn: app:{v}@db/shop", "a connection string without a scheme, named dsn"),
            ("3 validation errors for Signup\npassword\n  String should have at least 12 characters "
             "[type=string_too_short, input_value='{v}', input_type=str]", "pydantic 2's ValidationError"),
            ('422 {{"detail":[{{"type":"string_too_short","loc":["body","password"],"msg":"String should have at '
             'least 12 characters","input":"{v}","ctx":{{"min_length":12}}}}]}}', "FastAPI's 422 body"),
            ("send: b'GET /v1/me HTTP/1.1\\r\\nHost: api\\r\\nAuthorization: Token {v}\\r\\n\\r\\n'",
             "http.client's debug output, headers after an escaped line break")):
        flag = _fill(rng, "{b62:12}")
        add("secret", spelling.format(v=flag), flag, source=f"{source} (run by a review)")
    for spelling, source in (
            ("{{'Name': '/prod/db/password', 'Type': 'SecureString', 'Value': '{v}', 'Version': 1}}",
             "boto3's get_parameter of an SSM SecureString (botocore's stream logger)"),
            ('{{"Name": "prod/api-token", "SecretString": "{v}"}}', "boto3's get_secret_value (Secrets Manager)"),
            ("Invalid type for parameter MasterUserPassword, value: b'{v}', type: <class 'bytes'>",
             "botocore's ParamValidationError"),
            ("> b'FJDD1 LOGIN bob \"{v}\"'", "imaplib's debug output"),
            ("*cmd* 'PASS {v}'", "poplib's debug output"),
            ('1700000000.123456 [0 10.0.0.5:6379] "AUTH" "{v}"', "Redis MONITOR"),
            ("127.0.0.1:6379> AUTH {v}", "redis-cli's prompt"),
            ('"cmd": "echo {v} | passwd --stdin svc; exit 1"', "an Ansible shell task's failure"),
            ("+ unzip -q -P {v} backup.zip", "bash -x of unzip -P"),
            ("+ ssh-keygen -q -t ed25519 -N {v} -f key", "bash -x of ssh-keygen -N"),
            ("+ twine upload -u __token__ -p {v} dist/x.whl", "bash -x of twine -p"),
            ("+ sqlplus -s scott/{v}", "bash -x of sqlplus user/password"),
            ("+ rabbitmqadmin -u admin -p {v} list queues", "bash -x of rabbitmqadmin -p"),
            ("+ cqlsh -u cassandra -p {v}", "bash -x of cqlsh -p"),
            ("登录失败: 用户=zhang.wei, 密码：{v}", "a Chinese key with a full-width colon (Python logging)"),
            ("environ({{'DB_PASSWORD_EU': '{v}'}})", "os.environ with a region's suffix"),
            ("INFO sqlalchemy.engine.Engine [generated in 0.00008s] ('bob', '{v}')", "SQLAlchemy's echo"),
            ("DETAIL:  parameters: $1 = 'bob', $2 = '{v}'", "PostgreSQL's log_statement parameters"),
            ("(0.000) insert into apikeys (user_id, api_token) values (%s, %s); args=(1, '{v}'); alias=default",
             "Django's django.db.backends debug line"),
            ("{{ method: 'insert', options: {{}}, bindings: [ '{v}', 'bob' ], sql: 'insert into keys' }}",
             "knex's debug object"),
            ("INSERT INTO public.users VALUES (1, 'bob', '{v}', NULL);", "pg_dump --inserts"),
            ("[\n  'Host',\n  'api',\n  'X-Api-Key',\n  '{v}'\n]", "Node's console.log of req.rawHeaders"),
            ("[{{'type': 'string_too_short', 'loc': ('password',), 'msg': 'too short', 'input': '{v}'}}]",
             "pydantic's errors() repr")):
        flag = _fill(rng, "{b62:16}")
        add("secret", spelling.format(v=flag), flag, source=f"{source} (run by a second review)")
    plain = base64.b64encode(f"\0bob@example.com\0{_fill(rng, '{b62:16}')}".encode()).decode()
    add("secret", f"send: 'AUTH PLAIN {plain}\\r\\n'", plain, source="smtplib's debug output (run by a second review)")
    login = base64.b64encode(_fill(rng, '{b62:14}').encode()).decode()
    add("secret", f"send: 'AUTH LOGIN Ym9iQGV4YW1wbGUuY29t\\r\\n'\nreply: b'334 UGFzc3dvcmQ6\\r\\n'\n"
                  f"reply: retcode (334); Msg: b'UGFzc3dvcmQ6'\nsend: '{login}\\r\\n'\nreply: b'235 ok\\r\\n'",
        login, source="smtplib's debug output of AUTH LOGIN, the password on its own line")
    # Found by stop 46's review, in what real programs print (tests/integration/analysis/intake/test_client_output.py,
    # test_loguru.py, test_java_output.py run them).
    for spelling, source in (
            ("  File \"app.py\", line 17, in handler\n    connect(host, db_password)\n    │       │     └ '{v}'\n"
             "    │       └ 'db.internal'\n    └ <function connect at 0x7f2778cd84a0>", "loguru's diagnose values"),
            ("    return login(user, api_token)\n           |     |     -> '{v}'\n           |     -> 'alice'\n"
             "           -> <function login at 0x7f2778cd84a0>", "loguru's diagnose values drawn in ASCII"),
            ('{{"text": "Traceback (most recent call last):\\n  File \\"app.py\\", line 3, in <module>\\n'
             '    check(password)\\n    │     └ \'{v}\'\\n    └ <function check at 0x7f00>\\n"}}',
             "loguru's serialize=True"),
            ("    auth: 'deploy:{v}',", "Node's url.parse and http request options as console.log prints them"),
            ("Creds[username=svc, password={v}&3xQ]", "a Java record's toString"),
            ("{{password={v}(Qp)Lm2, user=svc}}", "a Java map's toString"),
            ("{{apiKey={v} horse battery, HOME=/root}}", "Java's System.getenv() printed"),
            ("'body': b'{{\"SecretString\": \"{{\\\\\"password\\\\\":\\\\\"{v}\\\\\"}}\"}}'",
             "botocore's DEBUG params: JSON in a JSON string in a bytes repr")):
        value = _fill(rng, "{b62:14}")
        add("secret", spelling.format(v=value), value, source=source)
    for spelling, source in (
            ("apiVersion: v1\ndata:\n  api-token: WnhrUDJtUTd2UjR0TDh3\n  db: {v}\nkind: Secret\nmetadata:\n"
             "  creationTimestamp: null\n  name: app-creds\n", "kubectl create secret generic -o yaml"),
            ('{{\n    "kind": "Secret",\n    "apiVersion": "v1",\n    "metadata": {{\n        "name": "app-creds"\n'
             '    }},\n    "data": {{\n        "db": "{v}"\n    }}\n}}', "kubectl create secret generic -o json"),
            ('    kubectl.kubernetes.io/last-applied-configuration: |\n      {{"kind":"Secret","apiVersion":"v1",'
             '"metadata":{{"name":"c"}},"data":{{"pw":"{v}"}}}}', "kubectl --save-config's annotation")):
        value = base64.b64encode(_fill(rng, "{b62:12}").encode()).decode()
        add("secret", spelling.format(v=value), value, source=f"a Kubernetes Secret's value under any name ({source})")
    cookie = _fill(rng, "{b62:24}")
    add("cookie", f"<Cookie connect.sid=s%3A{cookie}.k2j3 for 10.0.0.7/>", cookie,
        source="requests' cookie jar repr (run by a second review)")
    jwk_k = _fill(rng, "{url:43}")
    add("private_key", f"{{'kty': 'oct', 'k': '{jwk_k}'}}", jwk_k, source="jwcrypto's export(as_dict=True)")
    verifier = _fill(rng, "{url:43}")
    add("secret", f'{{"code": "x", "code_verifier": "{verifier}"}}', verifier, source="an OAuth PKCE token request")
    shared = _fill(rng, "{b62:24}")
    add("secret", f'{{"sharedKey": "{shared}", "primaryKey": "id"}}', shared,
        source="a shared key by its camel-case name: a generated value only (run by a review)")
    cookie = _fill(rng, "{b62:20}")
    add("cookie", f"send: b'GET / HTTP/1.1\\r\\nCookie: sessionid={cookie}\\r\\n\\r\\n'", cookie,
        source="http.client's debug output: a cookie after an escaped line break (run by a review)")
    jwk_d = _fill(rng, "{url:43}")
    add("private_key", f'loaded signing key {{"crv":"P-256","d":"{jwk_d}","kty":"EC","x":"AQAB","y":"AQAB"}}', jwk_d,
        source="RFC 7517 JWK: an EC private key's d (jwcrypto's export, run by a review)")
    pem64 = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUV2UUlCQURBTkJn" + _fill(rng, "{b64:64}")
    add("private_key", f"    client-key-data: {pem64}", pem64, source="a kubeconfig's base-64 PEM key")
    wrapped = [pem64[:76], _fill(rng, "{b64:76}"), _fill(rng, "{b64:40}") + "=="]
    add("private_key", "key:\n" + "\n".join(wrapped) + "\nloaded", *wrapped[1:],
        source="coreutils' base64 of a PEM key, wrapped at 76 (run by a second review)")
    der = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _fill(rng, "{b64:96}")
    add("private_key", f"SIGNING_KEY_B64={der}", der, source="a PKCS #8 DER key in base 64 (cryptography's export)")
    for number, network in (("2200", "Mir"), ("9792", "Troy")):
        card = _luhn_complete(number + _fill(rng, "{dig:11}"))
        add("credit_card", f"charge declined for card {card}", card, source=f"{network}: a Luhn-valid 16-digit number")
    for spelling, source in (('{{"phone": "{v}"}}', "a JSON field named phone"), ("msisdn={v}", "an MSISDN"),
                             ("customer_phone: {v}", "a prefixed phone name")):
        number = "415" + _fill(rng, "{dig:7}")
        add("phone", spelling.format(v=number), number, source=f"a phone number without a country code: {source}")
    config = base64.b64encode(('{"auths":{"ghcr.io":{"auth":"' + base64.b64encode(
        f"ci:{_fill(rng, '{b62:16}')}".encode()).decode() + '"}}}').encode()).decode()
    add("secret", f"  .dockerconfigjson: {config}", config, source="a Kubernetes registry secret, base 64 whole")
    ticket = f"ST-{rng.randint(1, 99999)}-{_fill(rng, '{b62:20}')}-cas01"
    add("secret", f"GET /login?service=https%3A%2F%2Fapp&ticket={ticket} 302", ticket, source="a CAS service ticket")
    basic = base64.b64encode(f"svc:{_fill(rng, '{b62:12}')}".encode()).decode()
    add("bearer", f'upstream rejected {{"auth": "Basic {basic}"}}', basic, source="RFC 7617 Basic under another name")
    area = rng.choice([n for n in range(1, 900) if n != 666])
    plain = f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"
    add("ssn", f"KYC rejected: ssn={plain}", plain, source="SSA number without separators after its name")
    area = rng.choice([n for n in range(1, 900) if n != 666])
    second = f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"
    add("ssn", f"batch KYC rejected: ssns=[{plain}, {second}]", second,
        source="SSA numbers without separators, listed after their name")
    return out


def positives(seed: int = 13) -> list[Positive]:
    """Every labelled positive, with its random parts drawn from `seed`."""
    rng = random.Random(seed)
    return _token_positives(rng) + _context_positives(rng)


_JAVA_FRAMES = """\
java.lang.IllegalStateException: Token cache not initialised for tenant acme
	at com.acme.auth.TokenValidator.validate(TokenValidator.java:42)
	at com.acme.auth.PasswordEncoder.matches(PasswordEncoder.java:88)
	at com.acme.keys.SecretKeyFactory.create(SecretKeyFactory.java:17)
	at org.springframework.security.authentication.ProviderManager.authenticate(ProviderManager.java:182)
	at com.acme.checkout.service.CheckoutService$$EnhancerBySpringCGLIB$$64db8cfd.placeOrder(<generated>)
	at jdk.internal.reflect.GeneratedMethodAccessor92.invoke(Unknown Source)
	at java.base/java.lang.Thread.run(Thread.java:1583)
	... 42 more
Caused by: java.lang.NullPointerException: Cannot invoke "String.length()" because "password" is null"""
_PYTHON_FRAMES = """\
Traceback (most recent call last):
  File "/app/.venv/lib/python3.11/site-packages/django/core/handlers/base.py", line 197, in _get_response
    response = wrapped_callback(request, *callback_args, **callback_kwargs)
  File "/app/accounts/views.py", line 57, in refresh_token
    return self.store.load(user_id)
  File "/app/accounts/secrets.py", line 12, in get_api_key
    raise KeyError(name)
KeyError: 'api_key'"""
_GO_FRAMES = """\
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x4a5c3e]

goroutine 1243 [running]:
github.com/acme/payments/internal/ledger.(*Ledger).Settle(0xc0009b122b, {0xc000f8019b, 0x7, 0x8})
	/app/internal/ledger/ledger.go:22 +0x1d4
github.com/acme/payments/internal/auth.(*TokenStore).Get(0xc000276fab, {0x9a5e40, 0xc0009b122b})
	/go/pkg/mod/github.com/acme/auth@v1.4.2/store.go:20 +0x9b
net/http.HandlerFunc.ServeHTTP(0xc000194000, {0x7f2a8c, 0xc0001a2000}, 0xc0001b6000)
	/usr/local/go/src/net/http/server.go:2136 +0x29"""
_NODE_FRAMES = """\
TypeError: Cannot read properties of undefined (reading 'token')
    at AuthService.refresh (/app/src/auth/service.js:41:23)
    at async Promise.all (index 0)
    at /app/node_modules/@acme/session-store/lib/index.js:118:15
    at processTicksAndRejections (node:internal/process/task_queues:95:5)"""

NEGATIVES: tuple[Negative, ...] = (
    Negative("stack frames", _JAVA_FRAMES),
    Negative("stack frames", _PYTHON_FRAMES),
    Negative("stack frames", _GO_FRAMES),
    Negative("stack frames", _NODE_FRAMES),
    Negative("stack frames",
             "\tat com.acme.auth.TokenValidator.validate(TokenValidator.java:42) ~[auth-1.4.2.jar:1.4.2]"),
    Negative("stack frames", "\tat org.hibernate.SessionFactoryImpl.openSession(SessionFactoryImpl.java:512)"),
    Negative("stack frames", '  File "/app/auth.py", line 57, in refresh_token\n    return self.store.load(user_id)'),
    Negative("hashes", "md5 9e107d9d372bb6826bd81d3542a419d6 sha1 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
    Negative("hashes", "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 mismatch"),
    Negative("hashes", "image digest sha256:9b2a3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b pulled"),
    Negative("hashes", "etag \"33a64df551425fcc55e4d42a148795d9f25f89d4\" stale"),
    Negative("prices", "coupon: $5$ off orders over $6$ (was $1$2$3), shell var $y$ unset"),
    Negative("hashes", "fingerprint 5f2b7c0d2e9a41b8c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930 grouped"),
    Negative("uuids", "request 123e4567-e89b-12d3-a456-426614174000 failed"),
    Negative("uuids", "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7"),
    Negative("uuids", "correlation-id: 6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
    Negative("uuids", "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    # Ids whose digit runs, read without their letters, are Luhn-valid cards or an IBAN (the rules took them).
    Negative("uuids", "analysis 48086433-6325-5020-8360-8aad9638fa33 published"),
    Negative("uuids", "RequestId: 03BAA147-AD84-F6D2-5B57-3E828A13502C"),
    Negative("commit shas", "checked out 5d5784812739369c5c762d5611f59362e93d38b8"),
    Negative("commit shas", "deployed 8d64db8cfd7d94f657446221beb0d96a7cbad642 (ac5bd885) to prod"),
    Negative("commit shas",
             "git checkout 1f3c2a9 && git log --oneline 1f3c2a9b7e..e83c5163316f89bfbde7d9ab23ca2e25604af290"),
    Negative("commit shas", '{"resource.service.version": "8d64db8cfd7d94f657446221beb0d96a7cbad642"}'),
    Negative("ordinary log text", "Checkout failed for cart ce90f7b176a9 (customer 34227)"),
    Negative("ordinary log text", "GET /api/v1/orders/42?page=2&sort=asc 200 13ms"),
    Negative("ordinary log text", "password reset email queued for user 42"),
    Negative("ordinary log text", "Failed password for invalid user admin from port 22 ssh2"),
    Negative("ordinary log text", "token expired, refreshing (attempt 2 of 3)"),
    Negative("ordinary log text", "SyntaxError: Unexpected token } in JSON at position 10"),
    Negative("ordinary log text", "KeyError: 'currency'"),
    Negative("ordinary log text", "grant_type=password client_id=web-app scope=openid"),
    Negative("ordinary log text", "token_type=Bearer expires_in=3600"),
    Negative("ordinary log text", '{"token_type": "Bearer", "expires_in": 3600, "scope": "read"}'),
    Negative("ordinary log text", "bypass=true compass: north overpass=closed"),
    Negative("ordinary log text", "cache key=orders:42 miss; primary key: id"),
    Negative("ordinary log text", "session: started for user 42, auth: ok"),
    Negative("ordinary log text", "tokenizer=bpe max_tokens=512 token_count=17"),
    Negative("ordinary log text", "the bearer of this message is authorised"),
    Negative("ordinary log text", "order 4111111111111112 at 1714644843551 (epoch ms)"),
    Negative("ordinary log text", "dd.trace_id=4629843927494762385 dd.span_id=1234567890123456789"),
    Negative("ordinary log text", "took 1234567890123 ns; offset 4111111111; port 6379; pid 31337"),
    Negative("ordinary log text", "spring-core-5.3.20.jar jackson-databind-2.13.4.2.jar node v20.11.1 go1.22.3"),
    Negative("ordinary log text", "2024-01-15T10:22:33.123Z INFO processed 1,234,567 rows in 12.5s"),
    Negative("ordinary log text", "pod checkout-7d9f8b6c5-x2k9p restarted; node ip-10-0-3-7.ec2.internal"),
    Negative("ordinary log text", "hibernate-5.4.3.2.Final.jar; rpm-1.2.3.4.el7.x86_64; host.10.0.3.7.example.lan"),
    Negative("ordinary log text", 'probe - - "GET /health HTTP/1.1" 200 45 6789 "-" "kube-probe/1.29"'),
    Negative("ordinary log text", "paired device 84-41-67-32-db-e1; backup-2024-06-01-12-30.tar; form 000-12-3456"),
    Negative("stack frames", '  File "/app/auth.py", line 9, in login\n    log.info("password=" + masked(pw))'),
    Negative("ordinary log text", "price 12.99 EUR, qty 3, total 38.97; ratio 0.30000000000000004"),
    Negative("ordinary log text", "IllegalStateException: Expected BEGIN_OBJECT but was STRING at line 1 column 1"),
    Negative("ordinary log text", "module github.com/acme/auth@v1.4.2 and @scope/pkg@2.0.1 resolved"),
    Negative("ordinary log text", "ERROR [main] o.s.b.SpringApplication: Application run failed"),
    Negative("ordinary log text", "goroutine 1243 [running]: 0xc0009b122b +0x1d4"),
    Negative("ordinary log text", "release v1.2.3-rc.1+build.5 on 2024-01-15; ticket ACME-12345"),
    Negative("ordinary log text", "user_id=42 tenant=acme region=eu-west-1 az=eu-west-1a"),
    Negative("ordinary log text", "dead::beef is not an address; A::B::C scope"),
    Negative("ordinary log text", "Bearer realm=\"api\", error=\"invalid_token\""),
    Negative("ordinary log text", "skipping task-queue-worker-3 (disk-usage 91%)"),
    Negative("ordinary log text", "count=4111111111111111111 bytes (over limit)"),
    Negative("ordinary log text", "Caused by: javax.crypto.BadPaddingException: Given final block not properly padded"),
    Negative("ordinary log text", "[REDACTED:secret] was already hidden upstream"),
    Negative("ordinary log text", "sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) NOT NULL constraint failed: "
                                  "users.password\n[SQL: INSERT INTO users (name, password) VALUES (?, ?)]\n"
                                  "[parameters: ('bob', None)]"),
    Negative("ordinary log text", "[SQL: SELECT orders.id FROM orders WHERE orders.customer_id = ? "
                                  "AND orders.status = ?]\n[parameters: (34227, 'pending')]"),
    Negative("type reprs", "settings: Settings(db_password=SecretStr('**********'), debug=False)"),
    Negative("type reprs", "refresh failed: token=AccessToken(expiresAt=2024-01-15T10:22:33Z, scope=read)"),
    Negative("type reprs", "login with credentials=Credentials[username=bob, realm=prod]"),
    Negative("type reprs", "window token=WindowToken{3f2a9c1 u0 com.example.shop/.MainActivity}"),
    Negative("ordinary log text", "Command '['docker', 'run', '-u', '1000:1000', 'app']' returned non-zero exit "
                                  "status 1."),
    Negative("ordinary log text", "pymysql.err.IntegrityError: (1062, \"Duplicate entry 'bob' for key "
                                  "'users.email'\")"),
    Negative("ordinary log text", '{"p": "abcdefghijklmnopqrstu", "q": "search terms go here", "page": 2}'),
    Negative("ordinary log text", "+ zip -r -q backup.zip dump; 7z x backup.7z -o/tmp/out; mongosh --port 27017"),
    Negative("ordinary log text", "ST-1234 fixed in release 4.2; see ST-1234-follow-up"),
    Negative("ordinary log text", "INSERT INTO events (kind, detail) VALUES ('login', 'ok'), ('logout', 'ok')"),
    Negative("type reprs", "Field(name='password', required=True, min_length=12)"),
    Negative("ordinary log text", "phone_id=12345678 phone_count=3 hotel=12345678 telemetry=42"),
    Negative("ordinary log text", "--- PASS: TestCheckout (0.00s)\n--- FAIL: TestRefund (0.01s)\nAUTH failed"),
    Negative("ordinary log text", "['token', 'expired', 'password', 'reset'] auth failed for user bob"),
    Negative("stack frames", '    AUTHORIZER_TYPES = ["TOKEN", "REQUEST", "COGNITO_USER_POOLS"]'),
    Negative("ordinary log text", "send: 'data\\r\\n'\nreply: b'354 go ahead\\r\\n'\nsend: 'quit\\r\\n'"),
    Negative("ordinary log text", "reply: b'250-mail.test\\r\\n'\nreply: b'250 AUTH PLAIN LOGIN CRAM-MD5\\r\\n'"),
    Negative("stack frames", "    def login(self, user='', passwd='', acct='', secure=True):"),
    Negative("ordinary log text", "login failed: password is invalid for bob; the new password is 12 characters long"),
    Negative("ordinary log text", "stored password is sha256-hashed; passcode is 6-digits; password is 2FA-protected"),
    Negative("stack frames", "    return lookup(user_name, retries)\n           │      │          └ 3\n"
                             "           │      └ 'alice'\n           └ <function lookup at 0x7f2778cd84a0>"),
    Negative("ordinary log text", "apiVersion: v1\ndata:\n  log_level: debug\n  region: eu-west-1\nkind: ConfigMap\n"
                                  "metadata:\n  name: app-config\n"),
)
"""Text that must come out of redaction exactly as it went in."""
